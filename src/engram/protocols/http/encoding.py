"""Request bodies of the REST API are UTF-8, as RFC 8259 requires of JSON between systems.

Python's JSON parser, which FastAPI and the memory routes use, is more lenient: given bytes,
it guesses UTF-16 or UTF-32 from the first bytes and skips a UTF-8 byte order mark. So the
REST API stored, searched and rated with bodies the MCP endpoint (whose parser reads UTF-8
only) answered ``-32700``, and that docs/api.md says are a 400. :class:`Utf8Bodies` checks
the bytes of each ``/v1`` body as the route reads them (so a route that authenticates before
it reads still answers 401 first): a byte order mark, a NUL byte (UTF-16 or UTF-32 of ASCII
text; JSON escapes U+0000 in strings and allows it nowhere else) or bytes that are not UTF-8
raise :class:`NotUtf8`, which the handlers answer ``400 bad-request``.
"""

from __future__ import annotations

import codecs

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Routes whose bodies are checked: the REST API (``/mcp`` answers for itself).
PREFIX = "/v1/"
_BOM = codecs.BOM_UTF8


class NotUtf8(StarletteHTTPException):
    """A body that is not UTF-8 JSON text (an HTTP exception, so FastAPI's own body parsing
    lets it through to the handlers)."""

    def __init__(self) -> None:
        super().__init__(400, "the body is not valid JSON: JSON text is UTF-8, without a BOM")


class Utf8Bodies:
    """ASGI middleware: a ``/v1`` request body that starts with a byte order mark or is not
    UTF-8 raises :class:`NotUtf8` when the route reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        head = b""

        async def checked() -> Message:
            nonlocal head
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunk: bytes = message.get("body", b"")
            if len(head) < len(_BOM):
                head += chunk[: len(_BOM) - len(head)]
                if head == _BOM[: len(head)] and len(head) == len(_BOM):
                    raise NotUtf8
            if b"\x00" in chunk:  # UTF-16 or UTF-32 of ASCII; JSON text never holds a NUL
                raise NotUtf8
            try:
                decoder.decode(chunk, final=not message.get("more_body", False))
            except UnicodeDecodeError:
                raise NotUtf8 from None
            return message

        await self.app(scope, checked, send)
