"""PII and secret screening for memory content: deterministic detectors that report spans.

:func:`scan` looks for personal identifiers and credentials in free text and returns one
:class:`PiiFinding` per hit: a kind and the ``[start, end)`` character span. The matched value
never leaves this module except as that span. No field holds it, nothing is logged, and no
exception is raised with it. The module is pure (no I/O, no logging, no global state after
import) and uses only the standard library, ``python-stdnum`` and ``phonenumbers``.

What it detects
---------------
* ``email``: ``local@domain.tld`` with a dotted domain and an alphabetic TLD of 2+ letters.
  User info in a URL (``scheme://user@host``) and SSH remotes (``git@host:org/repo``) are not
  addresses.
* ``phone``: ``phonenumbers.PhoneNumberMatcher`` at leniency VALID, default region ``US``.
  It reads each run of digits and phone punctuation that no more specific finding (card,
  IBAN, id) already covers. Explicit ``+CC`` numbers of every country are read too. A number
  in national format (leading trunk ``0``, as in ``020 7946 0958``) counts only when a phone
  word (``phone``, ``tel``, ``mobile``, ``call``, ...) occurs in the text and one of a dozen
  common regions accepts it. A hit is dropped when it is glued to other token characters
  (``INV-2024-000123``) or follows an order, ticket, invoice, build or similar label.
* ``us_ssn``: ``AAA-GG-SSSS`` accepted by ``stdnum.us.ssn`` (no 000/666/9xx area, no 00 group,
  no 0000 serial, no published samples). Without dashes it also needs an SSN keyword before it.
* ``national_id``: UK NINO (prefix rules), Spanish DNI and NIE, Italian codice fiscale, French
  NIR, all checked by ``stdnum`` where a module exists. Formats made only of digits (Canadian
  SIN, Dutch BSN, German Steuer-ID, Indian Aadhaar) and the checksum-less Indian PAN are also
  flagged, but only when an identity keyword (``SIN``, ``BSN``, ``Steuer-ID``, ``Aadhaar``,
  ``PAN``, ...) comes up to 48 characters before them. The checksum has to pass too, where
  there is one. A random nine-digit number passes a Luhn or 11-proof check one time in ten,
  which is too often to trust on its own.
* ``payment_card``: 13 to 19 digits, grouped by spaces or dashes or not at all. They must pass
  the Luhn check, start with a known issuer prefix (Visa, Mastercard, Amex, Discover, Diners,
  JCB, UnionPay, Maestro) and have a length that issuer uses. Visa counts at 16 and 19 digits
  only: 13-digit Visa is retired, and EAN-13 barcodes starting with 4 look the same. A grouped
  run that continues an IBAN-like group before it (``DE89 3704 ...``) is not a card.
* ``iban``: country code, check digits and BBAN, accepted by ``stdnum.iban`` (country length
  and format, mod 97).
* ``aws_access_key_id``: ``AKIA``/``ASIA``/... followed by 16 upper-case letters and digits.
* ``aws_secret_access_key``: 40 base64 characters, only when an AWS secret keyword comes up to
  100 characters before them (``aws_secret_access_key=``, ``AWS secret``,
  ``SecretAccessKey``). The value must mix upper and lower case and have entropy >= 4.
* ``github_token``: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36 or more characters, and
  ``github_pat_`` fine-grained tokens.
* ``slack_token``: ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/``xoxo-`` tokens,
  rotating ``xoxe.xoxp-1-...`` tokens and ``hooks.slack.com`` webhook URLs.
* ``stripe_key``: ``sk_``/``rk_``/``pk_`` + ``live_``/``test_`` keys and ``whsec_`` webhook
  secrets.
* ``jwt``: three base64url segments whose first segment decodes to a JSON object with
  ``"alg"``.
* ``private_key``: a ``-----BEGIN ... PRIVATE KEY-----`` header (RSA, EC, DSA, OPENSSH,
  ENCRYPTED, PGP ``... PRIVATE KEY BLOCK``) followed by key material: at least one unbroken
  run of 24 base64 characters. A bare header mentioned in prose is not a key. The span runs
  to the matching END line, or to the end of the base64 body when the END line is missing.
* ``url_password``: the password in ``scheme://user:password@host``. It is not flagged when
  the password is empty or a placeholder.
* ``secret_assignment``: a value assigned to a secret-looking name: ``api_key=``,
  ``"client_secret": "..."``, ``DB_PASSWORD='...'``, ``token: ...``, ``the api key is ...``,
  ``api key 4f9b...``, ``Authorization: Bearer ...`` or ``Basic ...``. The name is one
  identifier, or two words (``api key``, ``db password``), followed by ``=``, ``:``, ``:=``,
  ``=>``, ``is``/``was`` or just a space. A short phrase may sit between name and operator
  (``the password for the router is ...``). The span is the value, without quotes. The
  rule:

  - the name, split into words (``snake_case``, ``kebab-case``, ``camelCase``), contains a
    password word (``password``, ``passwd``, ``pwd``, ``pass``, ``passphrase``, ``pw``) or a
    secret word (``secret``, ``token``, ``apikey``, ``credential(s)``, ``key`` after
    ``api``/``access``/``private``/``signing``/..., or an upper-case environment name ending
    in ``_KEY`` such as ``OPENAI_KEY``). A lower-case ``cache_key`` or ``sort_key`` is not
    secret. The name contains no word that marks metadata (``hash``, ``name``, ``url``,
    ``id``, ``max``, ``type``, ``length``, ...);
  - the value is not a placeholder: empty, ``changeme``, ``your_key_here``, ``<...>``,
    ``${VAR}``, ``{{var}}``, ``$VAR``, ``****``, ``xxxx``, ``example``/``dummy``/``redacted``,
    and so on, nor base64 of such a placeholder (``cGFzc3dvcmQ=``). An unquoted value is not
    a reference either: a dotted path, a ``SCREAMING_SNAKE`` name, or a call or subscript
    such as ``os.environ[...]``. It holds no URL (``url_password`` covers those) and no
    ``sha256:`` style digest;
  - password values: length >= 8, Shannon entropy >= 2.5 bits/char, and at least two
    character classes (lower, upper, digit, symbol);
  - other values: length >= 12, Shannon entropy >= 3.0 bits/char, not only digits, and not a
    run of plain words (``bert-base-uncased``);
  - a value separated from its name by a space only (no ``=``, ``:`` or ``is``) must look
    random: length >= 20, entropy >= 3.5 bits/char, letters and digits.

  A secret named in prose further from its value than a short ``for ...``/``of ...`` phrase
  is missed. That is the price of not flagging every random-looking string.

Precision and recall
--------------------
A finding quarantines a record for review: it does not reject it. A false positive costs a
human a look. A miss leaks a credential or an identifier into long-lived, widely retrieved
memory. So the detectors lean to recall where a validator can keep precision up: checksums
(Luhn, mod 97, stdnum check digits), issuer prefixes, decodable JWT headers. They use context
keywords only where the shape alone is too weak, as for digit-only national ids, bare SSNs and
AWS secrets. The labelled corpus ``tests/data/pii_corpus.tsv`` and ``benchmarks/pii_eval.py``
measure the trade-off; the goals are recall >= 0.97 and a false-positive rate <= 0.02 on the
hard negatives.

Known limits
------------
* IBANs in lower case, Corsican NIRs (``2A``/``2B``), and national ids or phone numbers glued
  to other digits by a space (``SIN 046 454 286 2024``) are missed.
* A phone number in national format needs a phone word somewhere in the text, and a region
  from ``_NATIONAL_REGIONS``.
* Cost grows with the number of digit runs, since each run goes to the phone matcher. A
  record with no digits scans in tens of microseconds. A 2,000-character record that is all
  digit soup (``1 1 1 ...``) takes 10 to 15 ms.

Adding a kind
-------------
1. Add a member to :class:`PiiKind` and a priority in ``_PRIORITY``. When spans overlap, the
   higher priority wins; give a specific format a higher priority than a generic one.
2. Write a detector ``_find_<kind>(t: _Text) -> Iterator[_Span]``. It starts with a cheap
   pre-filter that returns at once on text that cannot match: a substring test on ``t.raw``
   or ``t.lower``, or the digit count ``t.digits``. Only then does it run its regexes and
   the expensive validators. Case-insensitive regexes over the whole text are slow in
   ``re``; test the lowered text instead. Yield spans only.
3. Append it to ``_DETECTORS``. Add positives and hard negatives to the corpus, add cases
   to ``tests/unit/test_pii.py``, and bump :data:`DETECTOR_VERSION`.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

import phonenumbers
from stdnum import iban as _iban
from stdnum import luhn
from stdnum.ca import sin as _ca_sin
from stdnum.de import idnr as _de_idnr
from stdnum.es import dni as _es_dni
from stdnum.es import nie as _es_nie
from stdnum.fr import nir as _fr_nir
from stdnum.in_ import aadhaar as _in_aadhaar
from stdnum.in_ import pan as _in_pan
from stdnum.it import codicefiscale as _it_cf
from stdnum.nl import bsn as _nl_bsn
from stdnum.us import ssn as _us_ssn

__all__ = ["DETECTOR", "DETECTOR_VERSION", "PiiFinding", "PiiKind", "scan"]

DETECTOR = "regex"
"""Label of this detector in the ``engram_pii_flags_total`` metric."""

DETECTOR_VERSION = "regex@1"
"""Bumped whenever a rule changes what is flagged; recorded with quarantine decisions."""


class PiiKind(StrEnum):
    """The kinds of personal data and secrets the screen reports."""

    EMAIL = "email"
    PHONE = "phone"
    US_SSN = "us_ssn"
    NATIONAL_ID = "national_id"
    PAYMENT_CARD = "payment_card"
    IBAN = "iban"
    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"  # noqa: S105 (a kind name, not a secret)
    GITHUB_TOKEN = "github_token"  # noqa: S105 (a kind name, not a secret)
    SLACK_TOKEN = "slack_token"  # noqa: S105 (a kind name, not a secret)
    STRIPE_KEY = "stripe_key"
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


_Span = tuple[PiiKind, int, int]


@dataclass(frozen=True, slots=True)
class _Text:
    """The text under scan and the cheap facts the detectors' pre-filters share."""

    raw: str
    lower: str
    digits: int

    @classmethod
    def of(cls, text: str) -> _Text:
        return cls(text, text.lower(), sum(map(text.count, "0123456789")))


# Overlapping spans: the higher priority survives (specific formats beat generic ones).
_PRIORITY: dict[PiiKind, int] = {
    PiiKind.PRIVATE_KEY: 100,
    PiiKind.JWT: 90,
    PiiKind.AWS_ACCESS_KEY_ID: 85,
    PiiKind.AWS_SECRET_ACCESS_KEY: 85,
    PiiKind.GITHUB_TOKEN: 85,
    PiiKind.SLACK_TOKEN: 85,
    PiiKind.STRIPE_KEY: 85,
    PiiKind.URL_PASSWORD: 80,
    PiiKind.SECRET_ASSIGNMENT: 60,
    PiiKind.PAYMENT_CARD: 55,
    PiiKind.IBAN: 55,
    PiiKind.US_SSN: 50,
    PiiKind.NATIONAL_ID: 45,
    PiiKind.EMAIL: 40,
    PiiKind.PHONE: 30,
}


# --------------------------------------------------------------------------- helpers


def _entropy(value: str) -> float:
    """Shannon entropy of the characters of ``value``, in bits per character."""
    size = len(value)
    if size == 0:
        return 0.0
    return -sum(n / size * math.log2(n / size) for n in Counter(value).values())


def _char_classes(value: str) -> int:
    """How many of lower case, upper case, digits and other characters occur in ``value``."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


_PLACEHOLDER_WORDS = frozenset(
    {
        "password", "passwd", "pass", "pwd", "pw", "secret", "token", "apikey", "api_key",
        "key", "changeme", "change_me", "null", "none", "nil", "undefined", "empty", "redacted",
        "hidden", "masked", "example", "sample", "dummy", "placeholder", "todo", "tbd", "test",
        "foo", "bar", "foobar", "xxx", "letmein", "default", "admin", "root", "user",
        "username", "mypassword", "mysecret", "yourpassword", "secret123", "password123",
    }
)  # fmt: skip
_PLACEHOLDER_MARKERS = re.compile(
    r"(?i)your[_\-]?|example|placeholder|changeme|change[_\-]me|redacted|dummy|sample|"
    r"xxxx|\*\*\*|\.\.\.|<|>|\$\{|\$\(|\{\{|%\(|^\$|^%|^\{|^\[|insert[_\-]|replace[_\-]?me|"
    r"not[_\-]?a[_\-]?real|fake|notreal"
)


def _is_placeholder(value: str) -> bool:
    """True for empty values, template variables and stand-ins such as ``changeme``."""
    stripped = value.strip().strip("\"'`")
    if not stripped or stripped.lower() in _PLACEHOLDER_WORDS:
        return True
    if len(set(stripped.lower())) <= 2:
        return True
    return _PLACEHOLDER_MARKERS.search(stripped) is not None


def _preceded_by(pattern: re.Pattern[str], text: str, start: int, window: int) -> bool:
    """True if ``pattern`` occurs in the ``window`` characters before ``start``."""
    return pattern.search(text, max(0, start - window), start) is not None


# --------------------------------------------------------------------------- email

_EMAIL = re.compile(
    r"(?<![\w.%+\-])[^\W_](?:[\w.%+\-]{0,62}[\w%+\-])?"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+[^\W\d_]{2,24}(?![\w\-])"
)


def _find_emails(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        start, end = m.span()
        token_start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start)) + 1
        if "://" in text[token_start:start]:
            continue  # user info of a URL, not an address
        if end + 1 < len(text) and text[end] == ":" and not text[end + 1].isspace():
            continue  # SSH remote: git@host:org/repo
        yield PiiKind.EMAIL, start, end


# --------------------------------------------------------------------------- url password

_URL_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@\"'<>\[\]]*:(?P<pw>[^\s/?#\"'<>\[\]]*)@[\w\[\].\-]+"
)
_URL_PLACEHOLDERS = frozenset({"pass", "passwd", "password", "pwd", "pw", "secret", "x"})


def _find_url_passwords(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "://" not in text or "@" not in text:
        return
    for m in _URL_CREDENTIALS.finditer(text):
        password = m.group("pw")
        if password.lower() in _URL_PLACEHOLDERS or _is_placeholder(password):
            continue
        yield PiiKind.URL_PASSWORD, m.start("pw"), m.end("pw")


# --------------------------------------------------------------------------- private keys

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s]|\\[nr])*")
# Key material: at least one unbroken base64 line (prose after a header does not count).
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]{24,}")


def _find_private_keys(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "-----BEGIN" not in text:
        return
    for m in _PEM_BEGIN.finditer(text):
        end_marker = f"-----END {m.group(1)}-----"
        end_at = text.find(end_marker, m.end())
        if end_at >= 0:
            body = text[m.end() : end_at]
            span_end = end_at + len(end_marker)
        else:
            body_match = _PEM_BODY.match(text, m.end())
            body = body_match.group(0) if body_match else ""
            span_end = m.end() + len(body.rstrip())
        if _PEM_LINE.search(body):
            yield PiiKind.PRIVATE_KEY, m.start(), span_end


# --------------------------------------------------------------------------- JWT

_JWT = re.compile(
    r"(?<![\w\-])(?P<header>eyJ[A-Za-z0-9_\-]{5,})\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*(?![\w\-])"
)


def _jwt_header_ok(segment: str) -> bool:
    """True if a base64url segment decodes to a JSON object with an ``alg`` member."""
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        header = json.loads(raw)
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError included
        return False
    return isinstance(header, dict) and "alg" in header


def _find_jwts(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "eyJ" not in text:
        return
    for m in _JWT.finditer(text):
        if _jwt_header_ok(m.group("header")):
            yield PiiKind.JWT, m.start(), m.end()


# --------------------------------------------------------------------------- vendor tokens

# Prefixes of AWS access key ids: long-term user keys (AKIA), STS (ASIA), and other principals.
_AWS_KEY_PREFIXES = (
    "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "APKA", "AROA",
)  # fmt: skip
_AWS_KEY_ID = re.compile(
    rf"(?<![A-Za-z0-9])(?:{'|'.join(_AWS_KEY_PREFIXES)})[A-Z0-9]{{16}}(?![A-Za-z0-9])"
)
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_SECRET_CONTEXT = re.compile(
    r"(?i)aws[\w\s.\-]{0,30}secret|secret[\s_\-]?access[\s_\-]?key|SecretAccessKey"
)
_GITHUB = re.compile(
    r"(?<![\w])(?:gh[pousr]_(?P<classic>[A-Za-z0-9]{36,251})|github_pat_(?P<fine>\w{22,242}))"
    r"(?![\w])"
)
_SLACK_TOKEN = re.compile(
    r"(?<![\w\-.])(?:xoxe\.)?xox[abposre]-"
    r"(?:\d{6,15}(?:-[0-9A-Za-z]{2,40}){1,4}|\d-[0-9A-Za-z]{30,})(?![\w\-])"
)
_SLACK_WEBHOOK = re.compile(
    r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/(?P<s>[A-Za-z0-9]{16,40})"
)
_STRIPE = re.compile(
    r"(?<![\w])(?:(?:sk|rk|pk)_(?:live|test)_|whsec_)(?P<body>[0-9A-Za-z]{16,247})(?![\w])"
)


def _random_enough(body: str, minimum: float = 3.0) -> bool:
    """True if a token body is not a placeholder and has at least ``minimum`` bits/char."""
    return not _is_placeholder(body) and _entropy(body) >= minimum


def _find_aws(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if any(prefix in text for prefix in _AWS_KEY_PREFIXES):
        for m in _AWS_KEY_ID.finditer(text):
            if "EXAMPLE" not in m.group(0) and _entropy(m.group(0)[4:]) >= 2.5:
                yield PiiKind.AWS_ACCESS_KEY_ID, m.start(), m.end()
    if "secret" not in t.lower:
        return
    for m in _AWS_SECRET.finditer(text):
        value = m.group(0)
        if (
            "EXAMPLE" not in value
            and any(c.islower() for c in value)
            and any(c.isupper() for c in value)
            and _entropy(value) >= 4.0
            and _preceded_by(_AWS_SECRET_CONTEXT, text, m.start(), 100)
        ):
            yield PiiKind.AWS_SECRET_ACCESS_KEY, m.start(), m.end()


def _find_github(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "gh" not in text and "github_pat_" not in text:
        return
    for m in _GITHUB.finditer(text):
        if _random_enough(m.group("classic") or m.group("fine")):
            yield PiiKind.GITHUB_TOKEN, m.start(), m.end()


def _find_slack(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "xox" in text:
        for m in _SLACK_TOKEN.finditer(text):
            if len(m.group(0)) >= 24 and _random_enough(m.group(0).rsplit("-", 1)[1], 2.5):
                yield PiiKind.SLACK_TOKEN, m.start(), m.end()
    if "hooks.slack.com" in text:
        for m in _SLACK_WEBHOOK.finditer(text):
            if _random_enough(m.group("s")):
                yield PiiKind.SLACK_TOKEN, m.start(), m.end()


def _find_stripe(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if "_live_" not in text and "_test_" not in text and "whsec_" not in text:
        return
    for m in _STRIPE.finditer(text):
        if _random_enough(m.group("body")):
            yield PiiKind.STRIPE_KEY, m.start(), m.end()


# --------------------------------------------------------------------------- assignments

_SECRET_STEMS = ("key", "secret", "token", "pass", "pwd", "pw", "cred")
_ASSIGNMENT = re.compile(
    r"(?<![\w.\-])"
    r"(?P<key>(?:[A-Za-z]{2,12} )?[\w.\-]{0,40}?"
    r"(?i:key|secret|token|pass|pwd|pw|credentials?|creds)[\w.\-]{0,40})"
    r"(?:(?P<gap>[ \t]+(?:for|of|on|at|to|in)[ \t][^.\n:=;,\"'`]{1,40}?)?"
    r"[\"']?(?:[ \t]{0,3}(?::=|=>|=|:)[ \t]{0,3}|[ \t]+(?:is|was)[ \t]+)|[\"']?(?P<loose>[ \t]+))"
    r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})'|`(?P<bq>[^`\n]{1,512})`"
    r"|(?P<bare>[^\s\"'`,;&(){}\[\]<>]{1,512}))"
)
_AUTH_HEADER = re.compile(r"(?<![\w\-])(?:[Bb]earer|Basic)[ \t]+(?P<v>[A-Za-z0-9._~+/\-]{12,}=*)")
_IDENT_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "pw", "passcode"})
_SECRET_WORDS = frozenset({"secret", "token", "apikey", "credential", "credentials", "creds"})
_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "signing", "encryption", "master", "auth",
        "session", "license", "licence", "client", "app", "service", "account", "webhook",
        "hmac", "jwt", "admin", "root", "deploy", "subscription", "consumer", "x",
    }
)  # fmt: skip
_METADATA_WORDS = frozenset(
    {
        "hash", "hashed", "digest", "checksum", "sha", "sha1", "sha256", "sha512", "md5",
        "fingerprint", "name", "names", "type", "file", "path", "url", "uri", "endpoint", "id",
        "ids", "length", "len", "count", "max", "min", "limit", "expiry", "expires",
        "expiration", "ttl", "timeout", "policy", "header", "field", "prefix", "format",
        "version", "rotation", "env", "var", "ref", "arn", "dir", "enabled", "required", "hint",
        "label", "pattern", "reset", "strength", "algorithm", "alg", "size", "public", "tokens",
        "usage", "budget", "kid", "location", "vault", "manager", "store", "provider", "mask",
        "rule", "rules", "regex", "scope", "scopes", "lifetime", "age", "last",
        "changed", "updated", "created", "rotated", "manual", "manuals",
    }
)  # fmt: skip
_WORDY = re.compile(r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)(?:[\-_. /](?:[a-z]+|[A-Z][a-z]+|[A-Z]+))*")
_REFERENCE = re.compile(r"[A-Za-z_]+\d{0,2}(?:\.[A-Za-z_]+\d{0,2})+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_DIGEST = re.compile(r"(?i)^(?:sha\d*|md5|blake2\w*)[:\-]")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")


def _key_class(key: str) -> str | None:
    """``"password"``, ``"secret"`` or None for the name on the left of an assignment."""
    words = [w.lower() for w in _IDENT_WORD.findall(key)]
    if not words or any(w in _METADATA_WORDS for w in words):
        return None
    if any(w in _PASSWORD_WORDS or w.endswith(("password", "passwd")) for w in words):
        return "password"
    if any(w in _SECRET_WORDS or w.endswith(("secret", "token", "apikey")) for w in words):
        return "secret"
    for before, word in itertools.pairwise(words):
        if word == "key" and before in _KEY_QUALIFIERS:
            return "secret"
    if len(words) > 1 and words[-1] == "key" and key.isupper():
        return "secret"  # an environment variable such as OPENAI_KEY or MAPBOX_KEY
    return None


def _decodes_to_placeholder(value: str) -> bool:
    """True if ``value`` is base64 of a placeholder (a Kubernetes secret holding ``password``)."""
    if len(value) % 4 or not _BASE64.fullmatch(value):
        return False
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return decoded.isprintable() and _is_placeholder(decoded)


def _secret_value_ok(value: str, key_class: str, next_char: str, *, bare: bool) -> bool:
    """The entropy rule of the module docstring, applied to one assigned value."""
    if next_char in {"(", "["} or _is_placeholder(value):
        return False
    if bare and _REFERENCE.fullmatch(value):
        return False
    if "://" in value or value.startswith(("/", "./", "~/")) or _DIGEST.match(value):
        return False
    if _decodes_to_placeholder(value):
        return False
    if key_class == "loose":  # name and value separated by a space only: "api key 4f9b..."
        return (
            len(value) >= 20
            and _entropy(value) >= 3.5
            and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value)
        )
    if key_class == "password":
        return len(value) >= 8 and _entropy(value) >= 2.5 and _char_classes(value) >= 2
    return (
        len(value) >= 12
        and _entropy(value) >= 3.0
        and not value.isdigit()
        and _WORDY.fullmatch(value) is None
    )


def _name_starts(text: str, lower: str) -> set[int]:
    """Where names holding a secret stem start: the stem's word, and the word before it."""
    starts: set[int] = set()
    for stem in _SECRET_STEMS:
        at = lower.find(stem)
        while at >= 0:
            word = at
            while (
                word > 0
                and at - word < 40
                and (text[word - 1].isalnum() or text[word - 1] in "_.-")
            ):
                word -= 1
            starts.add(word)
            if word >= 3 and text[word - 1] == " ":  # two-word names: "api key", "db password"
                prev = word - 1
                while (
                    prev > 0
                    and word - prev < 13
                    and text[prev - 1].isascii()
                    and text[prev - 1].isalpha()
                ):
                    prev -= 1
                if word - 1 - prev >= 2:
                    starts.add(prev)
            at = lower.find(stem, at + len(stem))
    return starts


def _assignment_candidates(t: _Text) -> Iterator[int]:
    """Offsets to try the assignment pattern at, in order."""
    if not any(stem in t.lower for stem in _SECRET_STEMS):
        return
    if len(t.lower) != len(t.raw):  # lower() changed offsets (rare scripts): try every match
        yield from (m.start() for m in _ASSIGNMENT.finditer(t.raw))
        return
    yield from sorted(_name_starts(t.raw, t.lower))


def _find_assignments(t: _Text) -> Iterator[_Span]:
    text = t.raw
    claimed = 0  # end of the last reported value; names inside it are part of the value
    for at in _assignment_candidates(t):
        m = _ASSIGNMENT.match(text, at) if at >= claimed else None
        if m is None:
            continue
        key_class = _key_class(m.group("key"))
        if key_class is None:
            continue
        group = next(g for g in ("dq", "sq", "bq", "bare") if m.group(g) is not None)
        value = m.group(group)
        start = m.start(group)
        if m.group("loose") is not None:
            key_class = "loose"
        if group == "bare":
            value = value.rstrip(".,:;")
        else:
            lead = len(value) - len(value.lstrip())
            start += lead
            value = value.strip()
        end = start + len(value)
        next_char = text[end] if group == "bare" and end < len(text) else ""
        if _secret_value_ok(value, key_class, next_char, bare=group == "bare"):
            claimed = end
            yield PiiKind.SECRET_ASSIGNMENT, start, end
    if "bearer" not in t.lower and "basic" not in t.lower:
        return
    for m in _AUTH_HEADER.finditer(text):
        if _secret_value_ok(m.group("v"), "secret", "", bare=False):
            yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")


# --------------------------------------------------------------------------- cards, IBAN

_CARD = re.compile(
    r"(?<![\w.\-/])"
    r"(?:\d{4}(?P<s1>[ \-])\d{4}(?P=s1)\d{4}(?P=s1)\d{4}(?:(?P=s1)\d{1,3})?"
    r"|\d{4}(?P<s2>[ \-])\d{6}(?P=s2)\d{4,5}"
    r"|\d{13,19})"
    r"(?![\w]|[.\-/]\d)"
)
# Issuer prefixes and the card lengths each issues (Visa, Mastercard, Amex, Diners, JCB,
# Discover, UnionPay, Maestro).
_CARD_BRANDS: tuple[tuple[re.Pattern[str], frozenset[int]], ...] = (
    (re.compile(r"4"), frozenset({16, 19})),  # 13-digit Visa is retired; EAN-13 codes are not
    (re.compile(r"5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)"), frozenset({16})),
    (re.compile(r"3[47]"), frozenset({15})),
    (re.compile(r"3(?:0[0-5]|[689])"), frozenset(range(14, 20))),
    (re.compile(r"35(?:2[89]|[3-8])"), frozenset(range(16, 20))),
    (re.compile(r"6(?:011|4[4-9]|5|2)"), frozenset(range(16, 20))),
    (re.compile(r"5[06-8]|6(?:304|7)"), frozenset(range(13, 20))),
)
_GROUP_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{0,2}\d[A-Za-z0-9]{0,3}[ \-]$")


def _card_ok(digits: str) -> bool:
    """Known issuer prefix, a length that issuer uses, and a valid Luhn check digit."""
    for prefix, lengths in _CARD_BRANDS:
        if prefix.match(digits):
            return len(digits) in lengths and luhn.is_valid(digits)
    return False


def _find_cards(t: _Text) -> Iterator[_Span]:
    if t.digits < 13:
        return
    text = t.raw
    for m in _CARD.finditer(text):
        grouped = m.group("s1") or m.group("s2")
        if grouped and _GROUP_BEFORE.search(text, max(0, m.start() - 7), m.start()):
            continue  # the tail of a longer grouped run, such as an IBAN
        if _card_ok(m.group(0).replace(" ", "").replace("-", "")):
            yield PiiKind.PAYMENT_CARD, m.start(), m.end()


_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def _find_ibans(t: _Text) -> Iterator[_Span]:
    if t.digits < 8:
        return
    text = t.raw
    for m in _IBAN.finditer(text):
        candidate = m.group(0)
        for _ in range(3):  # a trailing word ("EUR") may have been swallowed; retry shorter
            if _iban.is_valid(candidate):
                yield PiiKind.IBAN, m.start(), m.start() + len(candidate)
                break
            cut = candidate.rfind(" ")
            if cut < 0:
                break
            candidate = candidate[:cut]


# --------------------------------------------------------------------------- SSN, national ids

_SSN = re.compile(r"(?<![\w\-/.])\d{3}(?P<sep>[\- ]?)\d{2}(?P=sep)\d{4}(?![\w\-/]|\.\d)")
_SSN_CONTEXT = re.compile(r"(?i)\bssn|social[ \-]security|\bsoc\.? ?sec")


def _find_ssns(t: _Text) -> Iterator[_Span]:
    if t.digits < 9:
        return
    text = t.raw
    for m in _SSN.finditer(text):
        if not _us_ssn.is_valid(m.group(0).replace(" ", "-")):
            continue
        if m.group("sep") == "-" or _preceded_by(_SSN_CONTEXT, text, m.start(), 48):
            yield PiiKind.US_SSN, m.start(), m.end()


# Identity keywords: acronyms in upper case, phrases in any case (matched on the lowered text).
_ID_ACRONYMS = re.compile(r"\b(?:SIN|NAS|BSN|NIE|NIF|DNI|NIR|INSEE|PAN|NINO|UIDAI|IdNr|TIN|UID)\b")
_ID_PHRASES = re.compile(
    r"social insurance|burgerservice|sofinummer|steuer[\- ]?id|steueridentifikation"
    r"|identifikationsnummer|tax[ \-]?id|taxpayer|aadhaa?r|s[ée]curit[ée] sociale|codice fiscale"
    r"|national insurance|national id|identity number|id number|citizen service number"
    r"|personal number|permanent account number"
)
_ID_WINDOW = 48


class _IdKeywords:
    """End offsets of identity keywords in a text, found once, on first use."""

    __slots__ = ("_ends", "_text")

    def __init__(self, text: _Text) -> None:
        self._text = text
        self._ends: list[int] | None = None

    def before(self, start: int) -> bool:
        """True if a keyword ends in the ``_ID_WINDOW`` characters before ``start``."""
        if self._ends is None:
            ends = [m.end() for m in _ID_ACRONYMS.finditer(self._text.raw)]
            if len(self._text.lower) == len(self._text.raw):
                ends.extend(m.end() for m in _ID_PHRASES.finditer(self._text.lower))
            self._ends = ends
        return any(start - _ID_WINDOW <= end <= start for end in self._ends)


def _nino_ok(value: str) -> bool:
    return value.replace(" ", "")[:2] not in {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


# Identifiers with letters in them: distinctive enough to need no keyword, except PAN, which
# has no check digit.
_LETTER_IDS = re.compile(
    r"(?<![A-Za-z0-9\-])(?:"
    r"(?P<nino>[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D])"
    r"|(?P<dni>\d{8}-?[A-Z])"
    r"|(?P<nie>[XYZ]-?\d{7}-?[A-Z])"
    r"|(?P<cf>[A-Z]{6}[0-9LMNP-V]{2}[A-EHLMPR-T][0-9LMNP-V]{2}[A-Z][0-9LMNP-V]{3}[A-Z])"
    r"|(?P<pan>[A-Z]{3}[ABCFGHJLPT][A-Z]\d{4}[A-Z])"
    r")(?![A-Za-z0-9])"
)
_LETTER_ID_RULES: dict[str, tuple[Callable[[str], bool], bool]] = {
    # shape group: (validator, needs an identity keyword before it)
    "nino": (_nino_ok, False),
    "dni": (_es_dni.is_valid, False),
    "nie": (_es_nie.is_valid, False),
    "cf": (_it_cf.is_valid, False),
    "pan": (_in_pan.is_valid, True),
}
# Identifiers made of digits only, told apart by their length once separators are removed.
# The run is taken whole (possessive): a card number does not hide a 12-digit id inside it.
_DIGIT_IDS = re.compile(r"(?<![\w.\-])\d(?:[ .\-]?\d){8,}+(?![\w\-]|\.\d)")
_NON_DIGIT = re.compile(r"\D")
_DIGIT_ID_RULES: dict[int, tuple[tuple[Callable[[str], bool], ...], bool]] = {
    # digit count: (validators, any one of which must pass; needs an identity keyword)
    9: ((_ca_sin.is_valid, _nl_bsn.is_valid), True),
    11: ((_de_idnr.is_valid,), True),
    12: ((_in_aadhaar.is_valid,), True),
    15: ((_fr_nir.is_valid,), False),
}


def _find_national_ids(t: _Text) -> Iterator[_Span]:
    text = t.raw
    if t.digits < 4:
        return
    keywords = _IdKeywords(t)
    for m in _LETTER_IDS.finditer(text):
        group = m.lastgroup or ""
        validator, needs_keyword = _LETTER_ID_RULES[group]
        if needs_keyword and not keywords.before(m.start()):
            continue
        if validator(m.group(0)):
            yield PiiKind.NATIONAL_ID, m.start(), m.end()
    if t.digits < 9:
        return
    for m in _DIGIT_IDS.finditer(text):
        digits = _NON_DIGIT.sub("", m.group(0))
        rule = _DIGIT_ID_RULES.get(len(digits))
        if rule is None:
            continue
        validators, needs_keyword = rule
        if len(digits) == 15 and digits[0] not in "12":
            continue  # a NIR starts with the sex digit
        if needs_keyword and not keywords.before(m.start()):
            continue
        if any(validator(digits) for validator in validators):
            yield PiiKind.NATIONAL_ID, m.start(), m.end()


# --------------------------------------------------------------------------- phone numbers

# A run of digits and phone punctuation that may hold a number; the matcher reads each run.
_PHONE_RUN = re.compile(r"(?<![\w+])\+?\(?\d[\d \t().\-/]{5,24}\d")
_NOT_PHONE_LABEL = re.compile(
    r"(?i)(?:\b(?:order|ticket|invoice|inv|build|issue|pr|case|ref|reference|tracking|acct"
    r"|account|po|job|run|batch|txn|transaction|confirmation|serial|sku|version|release|id"
    r"|item|part|incident|request|req|pipeline|commit|cve|patent|isbn|seed|port|pin)"
    r"(?:[ \t]*(?:no\.?|number|num|id|#))?[ \t]*[#:=]?|#)[ \t]*$"
)
_GLUE = frozenset("-_/#.@=\\")
_PHONE_WORDS = (
    "phone", "tel", "mobile", "cell", "call", "fax", "whatsapp", "signal", "landline", "handy",
    "portable", "ring", "text", "sms", "dial", "contact",
)  # fmt: skip
# Regions tried for a number in national format (trunk prefix 0) near a phone keyword.
_NATIONAL_REGIONS = ("GB", "DE", "FR", "IT", "NL", "BE", "AT", "CH", "IE", "AU", "IN", "JP", "BR")


def _phone_span_ok(text: str, start: int, end: int) -> bool:
    """False when the digits are glued to another token or follow an order-like label."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if before.isalnum() or before in _GLUE:
        return False
    if after.isalnum() or after in "-_/@=" or (after in ".:" and text[end + 1 : end + 2].isdigit()):
        return False
    return _NOT_PHONE_LABEL.search(text, max(0, start - 32), start) is None


def _national_phone_ok(candidate: str) -> bool:
    """True if some common region reads ``candidate`` as a valid national number."""
    for region in _NATIONAL_REGIONS:
        try:
            number = phonenumbers.parse(candidate, region)
        except phonenumbers.NumberParseException:
            return False
        if phonenumbers.is_valid_number(number):
            return True
    return False


def _find_phones(t: _Text, taken: list[_Span]) -> Iterator[_Span]:
    """Phone numbers in digit runs that no more specific finding already covers."""
    text = t.raw
    if t.digits < 7:
        return
    national: bool | None = None  # whether a phone keyword occurs; computed on first need
    for run in _PHONE_RUN.finditer(text):
        start, end = run.span()
        if any(s < end and start < e for _, s, e in taken):
            continue
        if sum(c.isdigit() for c in run.group(0)) < 7:
            continue
        # The matcher looks one character around a candidate (letters, time suffixes).
        left, right = max(0, start - 1), min(len(text), end + 3)
        found = False
        matcher = phonenumbers.PhoneNumberMatcher(
            text[left:right], "US", leniency=phonenumbers.Leniency.VALID
        )
        for match in matcher:
            m_start, m_end = left + match.start, left + match.end
            if _phone_span_ok(text, m_start, m_end):
                found = True
                yield PiiKind.PHONE, m_start, m_end
        if found or not run.group(0).lstrip("(").startswith("0"):
            continue
        if national is None:
            national = any(word in t.lower for word in _PHONE_WORDS)
        if national and _phone_span_ok(text, start, end) and _national_phone_ok(run.group(0)):
            yield PiiKind.PHONE, start, end


# --------------------------------------------------------------------------- scan

_DETECTORS: tuple[Callable[[_Text], Iterator[_Span]], ...] = (
    _find_private_keys,
    _find_jwts,
    _find_aws,
    _find_github,
    _find_slack,
    _find_stripe,
    _find_url_passwords,
    _find_assignments,
    _find_cards,
    _find_ibans,
    _find_ssns,
    _find_national_ids,
    _find_emails,
)


def _resolve(spans: list[_Span]) -> list[PiiFinding]:
    """Drop spans that overlap a more specific (or, at equal priority, longer) one."""
    ranked = sorted(spans, key=lambda s: (-_PRIORITY[s[0]], s[1] - s[2], s[1]))
    kept: list[_Span] = []
    for kind, start, end in ranked:
        if all(end <= k_start or start >= k_end for _, k_start, k_end in kept):
            kept.append((kind, start, end))
    kept.sort(key=lambda s: (s[1], s[2]))
    return [PiiFinding(kind, start, end) for kind, start, end in kept]


def scan(text: str) -> list[PiiFinding]:
    """Every PII or secret span in ``text``, sorted by start, overlaps resolved by specificity."""
    if len(text) < 6:
        return []
    subject = _Text.of(text)
    spans: list[_Span] = []
    for detector in _DETECTORS:
        spans.extend(detector(subject))
    # Phones last: digit runs already claimed by a card, IBAN or id are not read again.
    spans.extend(_find_phones(subject, list(spans)))
    return _resolve(spans)
