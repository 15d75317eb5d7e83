"""Deep JSON made readable for the MCP SDK, so the Gate can refuse it.

The SDK reads each JSON-RPC message with a parser that stops at about 200 levels of nesting
(and Python's own at about 900), while the REST API hands any nesting the body parser reads
to the Gate, which refuses metadata deeper than 32 levels with an audited rejection. Over
MCP a ``remember`` whose metadata nested 200 levels deep was a parse error or an invalid
request (``id: null``): unaudited, and saying the client's valid JSON was none.

:func:`cut_deep` rewrites the text before any parser sees it: each container nested deeper
than :data:`MAX_MESSAGE_DEPTH` levels is replaced by a marker string. The message keeps its
id and its shape, and what arguments held that deep is still far deeper than any record may
nest, so the Gate refuses it for the same reason, and the audit (which keeps nesting only to
32 levels) records the same input. Text that is not balanced JSON is left to the parser.
"""

from __future__ import annotations

import json
import re

#: Nesting a message keeps: an argument sits three levels down (message, params, arguments),
#: so what is cut lies some 60 levels inside it, past the 32 the Gate and the audit read.
MAX_MESSAGE_DEPTH = 64
#: What stands in for a container cut away (a JSON string).
MARKER = json.dumps(f"<nested deeper than {MAX_MESSAGE_DEPTH} levels>")

#: A JSON string (escapes included) or a bracket: what the scan reads, skipping the rest.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


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
