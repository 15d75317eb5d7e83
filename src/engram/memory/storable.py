"""What storage can hold, and the form refused input takes in the audit log.

PostgreSQL ``text`` and ``json`` hold no NUL (``\\u0000``); UTF-8 cannot encode a lone
surrogate (``\\ud800`` without its pair); JSON has no NaN or Infinity; ``timestamptz`` values
travel in UTC, and an instant such as ``9999-12-31T23:59:59-14:00`` has no UTC form in Python;
deep nesting exhausts parsers and serialisers. :func:`text_problem`, :func:`value_problems`
and :func:`instant_problem` find these without echoing the value and without recursion. The
input boundary (``WriteInput`` in :mod:`engram.protocols.inprocess`) and the Gate's schema check
(:func:`engram.memory.schemas.validate_record`) refuse what they find.

A refusal is audited like any decision, so the refused input itself must be storable:
:func:`json_safe` turns any value into one the audit's canonical JSON can write, changing only
what storage cannot hold (NUL and lone surrogates become the six characters of their escape,
non-finite numbers their name, nesting past :data:`MAX_NESTING` and values past a count a
marker, other objects their text). :func:`audited_input` adds the bound: a refused input whose
JSON is larger than :data:`MAX_AUDITED_INPUT_BYTES` is kept as an excerpt, its size and its
SHA-256. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

#: Nesting the input boundary accepts: deeper than any record may be (metadata stops at five
#: levels), so deeper input is refused before the Gate reads it; audit snapshots stop here too.
MAX_NESTING = 32
#: Values (strings, numbers, containers) one metadata object may hold: one per byte of the
#: 16 KiB metadata limit, so no valid metadata comes close.
MAX_VALUES = 16_384
#: The problem of a non-finite number. Over MCP an integer too long for any parser here (more
#: than 4,300 digits) arrives as Infinity (``engram.protocols.mcp.depth``), hence the note.
NON_FINITE = (
    "numbers must be finite (NaN and Infinity are not JSON; "
    "MCP reads an integer of over 4,300 digits as Infinity)"
)
#: The largest proposal the boundary reads, as JSON: a valid record is far smaller (16 000
#: characters of content, 16 KiB of metadata), so anything larger is refused unread.
MAX_INPUT_BYTES = 256 * 1024
#: The largest refused input the audit log keeps whole, as JSON; a larger one is kept as an
#: excerpt of this many bytes with its size and SHA-256 (documented in docs/api.md).
MAX_AUDITED_INPUT_BYTES = 8 * 1024
#: Values :func:`json_safe` copies before it stands in a marker for the rest (an in-process
#: caller can build shared or cyclic structures far larger than any JSON body).
MAX_COPIED_VALUES = 1 << 20
#: The longest request id (idempotency key) a caller may give: REST's agent-scoped
#: ``Idempotency-Key`` fits, and the unique indexes on (agent, request id) hold it.
MAX_REQUEST_ID = 320

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOO_DEEP = f"<nested deeper than {MAX_NESTING} levels>"
_TOO_MANY = "<more values left out>"


def text_problem(text: str) -> str | None:
    """Why storage cannot hold ``text`` (a NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character"
    if _SURROGATE.search(text) is not None:
        return "contains a lone surrogate (not valid Unicode)"
    return None


#: Categories of characters that show nothing by themselves: controls, format characters
#: (zero-width spaces and joiners, direction marks, the byte order mark, the soft hyphen),
#: separators, and combining marks with no letter to sit on.
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
#: Letters and symbols drawn as blank space: the Hangul fillers and the braille blank.
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def shows_nothing(text: str) -> bool:
    """True when ``text`` has no character a reader would see: empty, whitespace, or only
    invisible characters such as zero-width spaces (what a blank content or query is)."""
    return all(
        char.isspace() or char in _BLANK_GLYPHS or unicodedata.category(char) in _UNSEEN_CATEGORIES
        for char in text
    )


def request_id_problem(request_id: object) -> str | None:
    """Why ``request_id`` cannot key a request (not text, empty, longer than
    :data:`MAX_REQUEST_ID`, or holding what storage cannot), or None."""
    if not isinstance(request_id, str):
        return "request_id: a string"
    if not 1 <= len(request_id) <= MAX_REQUEST_ID:
        return f"request_id: 1-{MAX_REQUEST_ID} characters"
    if _UNSTORABLE.search(request_id) is not None:
        return "request_id: a NUL or a lone surrogate cannot be stored"
    return None


def instant_problem(value: datetime, *, stored: bool = False) -> str | None:
    """Why an aware instant cannot be used (it has no UTC form), or None. A ``stored``
    instant (a record's times) may not be the first or last UTC instant either: the driver
    writes those as ``-infinity`` / ``infinity`` (an as-of instant may be one: it is only
    compared)."""
    if value.tzinfo is None:
        return None  # naive times are refused by the schema check, with its own reason
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        return "out of range once converted to UTC (years 1 to 9999)"
    if stored and utc in _RESERVED:
        return (
            "the first and last UTC instants are reserved "
            "(the database stores them as -infinity and infinity)"
        )
    return None


_RESERVED = frozenset({datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)})


def value_problems(value: object) -> list[str]:
    """What in a JSON-like value storage cannot hold, each reason once (no value quoted)."""
    found: dict[str, None] = {}
    pending: list[tuple[object, int]] = [(value, 0)]
    seen = 0
    while pending:
        item, depth = pending.pop()
        seen += 1
        if seen > MAX_VALUES:
            found[f"more than {MAX_VALUES} values"] = None
            break
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                found[f"a string {problem}"] = None
        elif isinstance(item, float):
            if not math.isfinite(item):
                found[NON_FINITE] = None
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_NESTING:
                found[f"nested deeper than {MAX_NESTING} levels"] = None
                continue
            members = item.items() if isinstance(item, Mapping) else enumerate(item)
            for key, member in members:
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    found[f"a key {problem}"] = None
                pending.append((member, depth + 1))
    return list(found)


def escape_text(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by the six characters of its escape
    (``\\u0000``, ``\\ud800``), so PostgreSQL and UTF-8 can hold it."""
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


@dataclass(frozen=True, slots=True)
class SafeJson:
    """A JSON-safe copy, and whether anything had to change to make it."""

    value: Any
    altered: bool


#: Largest integer copied as a number (about 4,000 digits): Python refuses to write an
#: integer of more than 4,300 digits as text, so a larger one is recorded by its size.
MAX_INTEGER_BITS = 13_000


class _Copier:
    """One :func:`json_safe` walk: counts what it copies and notes what it changed."""

    def __init__(self) -> None:
        self.copied = 0
        self.altered = False

    def text(self, text: str) -> str:
        if _UNSTORABLE.search(text) is None:
            return text
        self.altered = True
        return escape_text(text)

    def key(self, key: object) -> str:
        if isinstance(key, str):
            return self.text(key)
        return self.text(json.dumps(key, default=str))  # what json.dumps makes of such keys

    def number(self, value: bool | int | float | None) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            if value.bit_length() <= MAX_INTEGER_BITS:
                return value
            self.altered = True  # Python will not write its digits (int_max_str_digits)
            return f"<integer of {value.bit_length()} bits>"
        if math.isfinite(value):
            return value
        self.altered = True
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")

    def copy(self, value: object, depth: int) -> Any:
        self.copied += 1
        if self.copied > MAX_COPIED_VALUES:
            self.altered = True
            return _TOO_MANY
        if value is None or isinstance(value, bool | int | float):
            return self.number(value)
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping | list | tuple | set | frozenset):
            if depth >= MAX_NESTING:
                self.altered = True
                return _TOO_DEEP
            if isinstance(value, Mapping):
                return {self.key(k): self.copy(v, depth + 1) for k, v in value.items()}
            self.altered = self.altered or isinstance(value, set | frozenset)
            return [self.copy(member, depth + 1) for member in value]
        self.altered = True  # not a JSON value: its text stands in for it
        if isinstance(value, datetime | date | time):
            return value.isoformat()
        return self.text(str(value))


def json_safe(value: object) -> SafeJson:
    """A copy of ``value`` the audit's canonical JSON writes and PostgreSQL stores. A JSON
    value storage can hold comes back with the same JSON text (``altered`` is then False)."""
    copier = _Copier()
    copied = copier.copy(value, 0)
    return SafeJson(copied, copier.altered)


def json_text(value: object) -> str:
    """The canonical JSON text of a JSON-safe value (sorted keys, no spaces, UTF-8 kept), as
    the audit log writes it."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def input_bytes(raw: object) -> int:
    """The size of ``raw`` as canonical JSON, in bytes (escaped where storage needs it)."""
    return len(json_text(json_safe(raw).value).encode())


def audited_input(raw: object) -> dict[str, Any]:
    """The members of an audit snapshot that record refused input ``raw``.

    ``{"raw": <the input>}`` when its JSON fits :data:`MAX_AUDITED_INPUT_BYTES`; otherwise
    ``{"raw": {"excerpt", "bytes", "sha256", "truncated": true}}``: the first bytes of that
    JSON (cut at a character boundary), the full size and the SHA-256 of the full JSON.
    ``"escaped": true`` is added when NUL, lone surrogates, non-finite numbers, deep nesting or
    non-JSON objects had to be written differently from how they came.
    """
    safe = json_safe(raw)
    members: dict[str, Any] = {"raw": safe.value}
    encoded = json_text(safe.value).encode()
    if len(encoded) > MAX_AUDITED_INPUT_BYTES:
        members["raw"] = {
            "excerpt": encoded[:MAX_AUDITED_INPUT_BYTES].decode("utf-8", "ignore"),
            "bytes": len(encoded),
            "sha256": hashlib.sha256(encoded).hexdigest(),
            "truncated": True,
        }
    if safe.altered:
        members["escaped"] = True
    return members


__all__ = [
    "MAX_AUDITED_INPUT_BYTES",
    "MAX_INPUT_BYTES",
    "MAX_NESTING",
    "MAX_VALUES",
    "SafeJson",
    "audited_input",
    "escape_text",
    "input_bytes",
    "instant_problem",
    "json_safe",
    "json_text",
    "text_problem",
    "value_problems",
]
