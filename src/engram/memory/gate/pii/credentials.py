"""Credentials known by their format: URL passwords, private keys, JWTs and vendor tokens.

``url_password``, ``private_key``, ``jwt``, and the ``aws_access_key_id``,
``aws_secret_access_key``, ``github_token``, ``slack_token`` and ``stripe_key`` tokens.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import entropy, is_placeholder, preceded_by

# --------------------------------------------------------------------------- url password

_URL_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@\"'<>\[\]]*"
    r":(?P<pw>[^\s/\"'<>\[\]@]*)@[\w\[\].\-]+"  # "#" and "?" unescaped in a password
)
_URL_PLACEHOLDERS = frozenset({"pass", "passwd", "password", "pwd", "pw", "secret", "x"})


# A password given as a parameter of a connection URL: jdbc:sqlserver://host;password=…,
# postgres://host/db?user=app&password=…
_URL_PARAMETER = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.:\-]{1,30}://[^\s\"'<>]{1,200}?[;?&]"
    r"(?i:password|passwd|pwd)=(?P<pw>[^\s;&\"'<>]+)"
)


def find_url_passwords(t: Text) -> Iterator[Span]:
    text = t.raw
    if "://" not in text:
        return
    if "pass" in t.lower or "pwd" in t.lower:
        for m in _URL_PARAMETER.finditer(text):
            password = m.group("pw")
            if password.lower() not in _URL_PLACEHOLDERS and not is_placeholder(password):
                yield PiiKind.URL_PASSWORD, m.start("pw"), m.end("pw")
    if "@" not in text:
        return
    for m in _URL_CREDENTIALS.finditer(text):
        password = m.group("pw")
        if password.lower() in _URL_PLACEHOLDERS or is_placeholder(password):
            continue
        yield PiiKind.URL_PASSWORD, m.start("pw"), m.end("pw")


# --------------------------------------------------------------------------- private keys

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s]|\\[nr])*")
# Key material: at least one unbroken base64 line (prose after a header does not count).
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]{24,}")


# A PuTTY key file (.ppk): its private part is the base64 lines after "Private-Lines: N", in
# the clear or encrypted, as a PEM "ENCRYPTED PRIVATE KEY" is (written as lines or as "\n").
_PUTTY_HEAD = re.compile(r"PuTTY-User-Key-File-\d+:")
_PUTTY_PRIVATE = re.compile(
    r"Private-Lines: ?\d+(?:\s|\\[nr])+[A-Za-z0-9+/=]{24,}"
    r"(?:(?:\s|\\[nr])+[A-Za-z0-9+/=]{16,}(?![\w\-:]))*"
)
#: How far after a PuTTY key file's first line its private lines may start.
_PUTTY_REACH = 4000


def find_private_keys(t: Text) -> Iterator[Span]:
    text = t.raw
    if "PuTTY-User-Key-File-" in text:
        for m in _PUTTY_HEAD.finditer(text):
            private = _PUTTY_PRIVATE.search(text, m.end(), m.end() + _PUTTY_REACH)
            if private is not None:
                yield PiiKind.PRIVATE_KEY, m.start(), private.end()
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


# After a payload and an ellipsis, a run as long as a signature (128 bits and more): the
# whole token with an ellipsis for its last dot, not one cut short.
_SIGNATURE_AFTER = re.compile(r"\.+[A-Za-z0-9_\-]{22,}(?![\w\-])")


def find_jwts(t: Text) -> Iterator[Span]:
    text = t.raw
    if "eyJ" not in text:
        return
    for m in _JWT.finditer(text):
        end = m.end()
        if text.endswith(".", 0, end) and text.startswith("..", end):
            signed = _SIGNATURE_AFTER.match(text, end)
            if signed is None:
                continue  # "eyJhbGci….eyJzdWIi…": cut short where its signature would be
            end = signed.end()
        if _jwt_header_ok(m.group("header")):
            yield PiiKind.JWT, m.start(), end


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
    r"|secret[\w\s.\-]{0,40}\biam\b|\biam[\w\s.\-]{0,30}secret|s3a?\.secret\.key"
    r"|BasicAWSCredentials|AwsBasicCredentials|StaticCredentialsProvider"
)
_GITHUB = re.compile(
    r"(?<![\w])(?:gh[pousr]_(?P<classic>[A-Za-z0-9]{36,251})|github_pat_(?P<fine>\w{22,242}))"
    r"(?![\w])"
)
_SLACK_TOKEN = re.compile(
    r"(?<![\w\-.])(?:xoxe\.)?xox[abposre]-"
    r"(?:\d{6,15}(?:-[0-9A-Za-z]{2,40}){1,4}|\d-[0-9A-Za-z]{30,})(?![\w\-])"
)
# An app-level token (Socket Mode): "xapp-", a version digit, the app id, a number and 64 hex.
_SLACK_APP_TOKEN = re.compile(
    r"(?<![\w\-.])xapp-\d-A[A-Z0-9]{6,14}-\d{6,16}-(?P<s>[0-9a-f]{32,80})(?![\w\-])"
)
_SLACK_WEBHOOK = re.compile(
    r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/(?P<s>[A-Za-z0-9]{16,40})"
)
_STRIPE = re.compile(
    r"(?<![\w])(?:(?:sk|rk)_(?:live|test)_|whsec_)(?P<body>[0-9A-Za-z]{16,247})(?![\w])"
)


def _random_enough(body: str, minimum: float = 3.0) -> bool:
    """True if a token body is not a placeholder and has at least ``minimum`` bits/char."""
    return not is_placeholder(body) and entropy(body) >= minimum


def find_aws(t: Text) -> Iterator[Span]:
    text = t.raw
    if any(prefix in text for prefix in _AWS_KEY_PREFIXES):
        for m in _AWS_KEY_ID.finditer(text):
            if "EXAMPLE" not in m.group(0) and entropy(m.group(0)[4:]) >= 2.5:
                yield PiiKind.AWS_ACCESS_KEY_ID, m.start(), m.end()
    if "secret" not in t.lower and "credentials" not in t.lower:
        return
    for m in _AWS_SECRET.finditer(text):
        value = m.group(0)
        if (
            "EXAMPLE" not in value
            and any(c.islower() for c in value)
            and any(c.isupper() for c in value)
            and entropy(value) >= 4.0
            and preceded_by(_AWS_SECRET_CONTEXT, text, m.start(), 100)
        ):
            yield PiiKind.AWS_SECRET_ACCESS_KEY, m.start(), m.end()


def find_github(t: Text) -> Iterator[Span]:
    text = t.raw
    if "gh" not in text and "github_pat_" not in text:
        return
    for m in _GITHUB.finditer(text):
        if _random_enough(m.group("classic") or m.group("fine")):
            yield PiiKind.GITHUB_TOKEN, m.start(), m.end()


def find_slack(t: Text) -> Iterator[Span]:
    text = t.raw
    if "xox" in text:
        for m in _SLACK_TOKEN.finditer(text):
            if len(m.group(0)) >= 24 and _random_enough(m.group(0).rsplit("-", 1)[1], 2.5):
                yield PiiKind.SLACK_TOKEN, m.start(), m.end()
    if "xapp-" in text:
        for m in _SLACK_APP_TOKEN.finditer(text):
            if _random_enough(m.group("s")):
                yield PiiKind.SLACK_TOKEN, m.start(), m.end()
    if "hooks.slack.com" in text:
        for m in _SLACK_WEBHOOK.finditer(text):
            if _random_enough(m.group("s")):
                yield PiiKind.SLACK_TOKEN, m.start(), m.end()


def find_stripe(t: Text) -> Iterator[Span]:
    text = t.raw
    if "_live_" not in text and "_test_" not in text and "whsec_" not in text:
        return
    for m in _STRIPE.finditer(text):
        if _random_enough(m.group("body")):
            yield PiiKind.STRIPE_KEY, m.start(), m.end()
