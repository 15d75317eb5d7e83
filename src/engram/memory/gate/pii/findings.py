"""What a PII scan reports and what its detectors read.

:class:`PiiKind` names the kinds of personal data and secrets, :class:`PiiFinding` is one hit
as a kind and a span (never the matched value), ``Span`` is the ``(kind, start, end)`` tuple
the detectors yield, and :class:`Text` is the scanned text with the cheap facts their
pre-filters share.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PiiKind(StrEnum):
    """The kinds of personal data and secrets the screen reports."""

    EMAIL = "email"
    PHONE = "phone"
    US_SSN = "us_ssn"
    NATIONAL_ID = "national_id"
    PAYMENT_CARD = "payment_card"
    IBAN = "iban"
    BANK_ACCOUNT = "bank_account"
    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"  # noqa: S105 (a kind name, not a secret)
    GITHUB_TOKEN = "github_token"  # noqa: S105 (a kind name, not a secret)
    SLACK_TOKEN = "slack_token"  # noqa: S105 (a kind name, not a secret)
    STRIPE_KEY = "stripe_key"
    API_KEY = "api_key"
    JWT = "jwt"
    PRIVATE_KEY = "private_key"
    URL_PASSWORD = "url_password"  # noqa: S105 (a kind name, not a secret)
    SECRET_ASSIGNMENT = "secret_assignment"  # noqa: S105 (a kind name, not a secret)


@dataclass(frozen=True, slots=True)
class PiiFinding:
    """One hit: its kind and the ``[start, end)`` character span in the scanned text."""

    kind: PiiKind
    start: int
    end: int


Span = tuple[PiiKind, int, int]


@dataclass(frozen=True, slots=True)
class Text:
    """The text under scan and the cheap facts the detectors' pre-filters share."""

    raw: str
    lower: str
    digits: int

    @classmethod
    def of(cls, text: str) -> Text:
        lower = text.lower()
        if len(lower) != len(text):  # "İ" lowers to two characters: keep offsets aligned
            lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        return cls(text, lower, sum(map(text.count, "0123456789")))
