"""Deep JSON and long integers made readable for the MCP SDK, so the Gate can refuse them.

The SDK reads each JSON-RPC message with a parser that stops at about 200 levels of nesting
(and Python's own at about 900) and at integers of more than 4,300 digits, while the REST
API hands what the body parser reads to the Gate (and refuses a body it cannot read with an
audited rejection). Over MCP a ``remember`` whose metadata nested 200 levels deep, or held
such an integer, was a parse error or an invalid request (``id: null``): unaudited, and
saying the client's valid JSON was none.

:func:`readable` rewrites the text before any parser sees it. :func:`cut_deep` replaces each
container nested deeper than :data:`MAX_MESSAGE_DEPTH` levels by a marker string: the message
keeps its id and its shape, and what arguments held that deep is still far deeper than any
record may nest, so the Gate refuses it for the same reason, and the audit (which keeps
nesting only to 32 levels) records the same input. :func:`widen_long_integers` writes an
integer no parser here converts as a number past any float, read as infinity: an argument
holding one is refused as a non-finite number. Text that is not balanced JSON is left to the
parser.
"""

from __future__ import annotations

import json
import re

#: Nesting a message keeps: an argument sits three levels down (message, params, arguments),
#: so what is cut lies some 60 levels inside it, past the 32 the Gate and the audit read.
MAX_MESSAGE_DEPTH = 64
#: What stands in for a container cut away (a JSON string).
MARKER = json.dumps(f"<nested deeper than {MAX_MESSAGE_DEPTH} levels>")

#: A JSON string (escapes included), or one that never ends read to the end of the text: a
#: string that could fail to match would be tried again from each quote inside it, reading to
#: the end each time (a 1 MB body of escaped quotes held the event loop for hours).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)'
#: A JSON string or a bracket: what the scan reads, skipping the rest.
_TOKEN = re.compile(rf"{_STRING}|[\[\]{{}}]", re.DOTALL)


def cut_deep(text: str, limit: int = MAX_MESSAGE_DEPTH) -> str | None:
    """``text`` with every container deeper than ``limit`` levels replaced by :data:`MARKER`;
    None when nothing is that deep, or the brackets do not balance (not JSON: the parser
    says so)."""
    if text.count("{") + text.count("[") <= limit:
        return None  # too few openings to nest that deep
    pieces: list[str] = []
    depth = 0
    kept_from = 0
    cut_from: int | None = None
    for match in _TOKEN.finditer(text):
        found = match.group()
        if found[0] == '"':
            continue
        if found in "[{":
            depth += 1
            if depth > limit and cut_from is None:
                cut_from = match.start()
            continue
        depth -= 1
        if depth < 0:
            return None
        if cut_from is not None and depth == limit:
            pieces += [text[kept_from:cut_from], MARKER]
            kept_from, cut_from = match.end(), None
    if not pieces or depth != 0:
        return None
    pieces.append(text[kept_from:])
    return "".join(pieces)


#: The longest integer Python (and the SDK's parser) converts: ``sys.int_max_str_digits``.
MAX_INTEGER_DIGITS = 4300
#: Tried only where a run of digits starts: from every digit of a long run the search would
#: cost the run's length squared (runs of 4,300 digits in a 1 MB body: 29 s).
_LONG_DIGITS = re.compile(rf"(?<!\d)\d{{{MAX_INTEGER_DIGITS + 1}}}")
#: A JSON string, or an integer literal longer than that (not a float's part or exponent).
_LONG_INTEGER = re.compile(
    rf"{_STRING}|(?<![\w.+-])(-?)\d{{{MAX_INTEGER_DIGITS + 1},}}(?![\w.])", re.DOTALL
)


def widen_long_integers(text: str) -> str | None:
    """``text`` with each integer literal longer than :data:`MAX_INTEGER_DIGITS` written as a
    number past any float (``1e999999``), which both parsers read as infinity; None when
    there is none. The integer is beyond what any field holds, as infinity is: an argument
    holding one is refused like ``Infinity`` (audited, for a write), where the SDK's parser
    refused the whole message (``-32700``, ``id: null``, unaudited)."""
    if _LONG_DIGITS.search(text) is None:
        return None
    pieces: list[str] = []
    kept_from = 0
    for match in _LONG_INTEGER.finditer(text):
        if match.group(0)[0] == '"':
            continue
        pieces += [text[kept_from : match.start()], f"{match.group(1)}1e999999"]
        kept_from = match.end()
    if not pieces:
        return None
    pieces.append(text[kept_from:])
    return "".join(pieces)


def readable(text: str) -> str | None:
    """``text`` made readable by the SDK's parser (:func:`cut_deep`, then
    :func:`widen_long_integers`), or None when it needs neither."""
    cut = cut_deep(text)
    widened = widen_long_integers(cut if cut is not None else text)
    return widened if widened is not None else cut


def readable_bytes(body: bytes) -> bytes | None:
    """:func:`readable` of a UTF-8 body (None as there, or when it is not UTF-8)."""
    deep = body.count(b"{") + body.count(b"[") > MAX_MESSAGE_DEPTH
    if not deep and _LONG_DIGITS.search(body.decode("latin-1")) is None:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fixed = readable(text)
    return None if fixed is None else fixed.encode("utf-8")


def cut_deep_bytes(body: bytes, limit: int = MAX_MESSAGE_DEPTH) -> bytes | None:
    """:func:`cut_deep` of a UTF-8 body (None as there, or when it is not UTF-8)."""
    if body.count(b"{") + body.count(b"[") <= limit:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cut = cut_deep(text, limit)
    return None if cut is None else cut.encode("utf-8")
