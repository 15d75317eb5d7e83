"""PII rules written from writers ee and ff (dev): a key of no known vendor given a random
value, Slack app-level tokens, a KRA PIN named far from its value, a Nepali citizenship
certificate number, a UK NINO typed in lower case, Dutch and German phone words; and what
is not a phone (a ZIP+4 code, a meter number, a Belgian enterprise number) nor an account
(a sort code whose account is still to come). Values are made up here."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Vectorstore key for staging: Qm7TzL0pVx2WcR9bYk4NsH1jDf8gUe3A", "secret_assignment"),
        ("embeddings key = 'Hp3vX9qLm2RtZ8cWn5YbK7dJs0FgA4eU'", "secret_assignment"),
        (
            f"socket mode app token xapp-1-A07QK2M9ZTR-5812046639201-{'3c9e1f0a7b6d2e8f' * 4}",
            "slack_token",
        ),
        ("KRA PIN, needed for the payout to Wanjiru next month: A009284716Q", "national_id"),
        ("Citizenship certificate no. 12-03-71-04418 for the vendor file.", "national_id"),
        ("citizenship number 51-02-69-10233, issued in Kaski", "national_id"),
        ("tenant's ni no: jk 48 19 20 c, typed in lower case", "national_id"),
        ("Rotterdam office (010 414 6237, toestel 12) takes the keys.", "phone"),
        ("Durchwahl 030 2148 5521 for the caretaker.", "phone"),
    ],
)
def test_a_value_of_these_kinds_is_found(text: str, expected: str) -> None:
    """Each new rule finds its kind."""
    assert expected in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "Idempotency-Key: 9e2b6c4a-1f7d-4b3e-8a55-0c9d2e7f6b31 was reused on the retry.",
        "cache key: user_profile_v2_tenant_eu_west",
        "The sort key is 7f3a9c2e8b1d4f6a0c5e9b3d7f1a2c4e (a hex digest).",
        "PostHog project key phc_VxM4yNLtcgSDMSlHqTFT4X6BAO89q2Jrtw37eJ6ycQz goes in the client.",
        "Primary key: OrderLineItemsByWarehouseAndRegion",
        "Ticket A009284716Q is about the printer.",
        "Forward the deposit papers to Boston MA 02118-2519 by Friday.",
        "Meter point 1 48213906-07 4 was read on the 3rd.",
        "Managed by Immo Zuid BV, KBO 0512.334.908, invoice 2024/118.",
        "Only the sort code 20-32-06 so far; the tenant will send the account number later.",
        "The key ring holds jk 48 19 20 c, a locker code.",
    ],
)
def test_a_look_alike_is_not_reported(text: str) -> None:
    """A UUID, a word-like cache key, a hex digest, a public key given without ':' or '=',
    a readable primary key name, and a PIN-shaped ticket in a text that does not name the
    KRA (the shape alone is an ordinary reference)."""
    assert kinds(text) == set()


@pytest.mark.parametrize(
    "text",
    [
        "key: " + "Ab1" * 70_000,
        "rerank key for " + "x " * 100_000 + ": Qm7TzL0pVx2WcR9bYk4NsH1jDf8gUe3A",
        "xapp-1-A" + "B" * 200_000,
        "KRA " + "A0" * 100_000,
        "citizenship certificate no " * 8_000,
        "MA 02139-4307 " * 14_000,
        "12345678-90 " * 16_000,
        "ni no ab " * 20_000,
    ],
)
def test_crafted_runs_are_scanned_in_linear_time(text: str) -> None:
    """The new rules on 200 KB runs built to make them backtrack: each scan takes well
    under two seconds (the Gate's screening budget is per write)."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS
