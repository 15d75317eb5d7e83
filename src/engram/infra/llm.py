"""A text generator behind an OpenAI-compatible chat-completions endpoint (the optional LLM
summariser of consolidation). Any failure — transport, timeout, an error status, an answer
without text, an answer too deeply nested to parse — is an
:class:`~engram.errors.InfrastructureError`; the caller falls back.

Each call is bounded as a whole by ``timeout_seconds``: httpx's own timeout bounds each read,
so an endpoint sending its answer a byte at a time would otherwise hold a consolidation pass
(and the levels planned after it) past every deadline. A pass also cuts a call short at its
level's deadline (``consolidation.candidates``). Each call's HTTP client is made on a worker
thread: making one builds a TLS context, tens of milliseconds of CPU that would otherwise
hold the kernel's event loop once per summarised piece.

The answer is read as it arrives on the wire and decoded here, never by httpx: the request
asks for no compression, and an endpoint that compresses anyway (gzip or deflate) is
inflated piece by piece with the output bounded, so a small compressed answer cannot
expand into a large one in memory before the size limit sees it; a stream cut short, or
followed by more bytes, is refused. Other encodings are refused.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any, Protocol

import httpx

from engram.errors import InfrastructureError

#: The most of an answer that is read. A summary is at most 16,000 characters (the record's
#: limit), which JSON may spell in up to six bytes each; an endpoint sending more is cut off
#: there. Read whole, a huge answer grew the kernel's memory and then held its event loop
#: for minutes in the summary's checks.
MAX_ANSWER_BYTES = 256 * 1024


class LLMUnavailable(InfrastructureError):
    """The LLM endpoint did not give a usable answer."""


class _Inflater(Protocol):
    """What :func:`_limited` needs of a decompressor (zlib's, or :class:`_Deflate`)."""

    @property
    def unconsumed_tail(self) -> bytes: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


def _inflater(encoding: str) -> _Inflater | None:
    """A decompressor for the answer's ``Content-Encoding``, or None for none."""
    codings = [c.strip() for c in encoding.lower().split(",") if c.strip() not in ("", "identity")]
    if not codings:
        return None
    if codings in (["gzip"], ["x-gzip"]):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if codings == ["deflate"]:
        # zlib-wrapped, as the standard says, or raw deflate, as some servers send it
        return _Deflate()
    raise LLMUnavailable("summariser answer has an unsupported encoding")


class _Deflate:
    """Inflates ``deflate`` whether the server wrapped it in zlib's header or not."""

    def __init__(self) -> None:
        self._inner: _Inflater | None = None
        self._head = b""  # a first read of one byte: too short to tell the header
        self.unconsumed_tail = b""

    @property
    def unused_data(self) -> bytes:
        return b"" if self._inner is None else self._inner.unused_data

    @property
    def eof(self) -> bool:
        return self._inner is not None and self._inner.eof

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes:
        if self._inner is None:
            data, self._head = self._head + data, b""
            if len(data) < 2:
                self._head = data
                return b""
            wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        out = self._inner.decompress(data, max_length)
        self.unconsumed_tail = self._inner.unconsumed_tail
        return out


def _too_large() -> LLMUnavailable:
    return LLMUnavailable("summariser answer too large")


async def _limited(response: httpx.Response) -> bytes:
    """The decoded body of ``response``, unless it is longer than ``MAX_ANSWER_BYTES``
    (compressed or not): a compressed answer is never inflated past the limit, and is
    refused unless its stream ends where the body does."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise _too_large()
    inflater = _inflater(response.headers.get("content-encoding", ""))
    chunks: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        pending = raw
        while pending:
            if inflater is None:
                chunk, pending = pending, b""
            else:
                # at most one byte past the limit comes out of the inflater at once
                chunk = inflater.decompress(pending, MAX_ANSWER_BYTES - size + 1)
                pending = inflater.unconsumed_tail
                if inflater.unused_data:  # zlib would keep all that follows, unbounded
                    raise LLMUnavailable("summariser answer goes on after its end")
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise _too_large()
            chunks.append(chunk)
            if inflater is not None and not chunk and pending:
                raise LLMUnavailable("summariser answer could not be decoded")
    if inflater is not None and not inflater.eof:
        raise LLMUnavailable("summariser answer was cut short")
    return b"".join(chunks)


class OpenAICompatibleGenerator:
    """POSTs ``{base_url}/chat/completions`` with a system and a user message."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Accept-Encoding": "identity"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout_seconds

    @property
    def name(self) -> str:
        return self._model

    async def complete(self, instructions: str, text: str) -> str:
        body: dict[str, Any] = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": instructions},
                {"role": "user", "content": text},
            ],
        }
        try:
            async with asyncio.timeout(self._timeout):
                # made off the event loop: a client builds its TLS context (tens of ms of
                # CPU), during which no agent's request would move
                client = await asyncio.to_thread(httpx.AsyncClient, timeout=self._timeout)
                async with (
                    client,
                    client.stream("POST", self._url, json=body, headers=self._headers) as answer,
                ):
                    answer.raise_for_status()
                    data = json.loads(await _limited(answer))
        # RecursionError: a document nested deeper than the parser's stack
        except (httpx.HTTPError, TimeoutError, ValueError, RecursionError, zlib.error) as exc:
            raise LLMUnavailable(f"summariser endpoint failed: {type(exc).__name__}") from exc
        try:
            answer = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailable("summariser answer has no choices[0].message.content") from exc
        if not isinstance(answer, str):
            raise LLMUnavailable("summariser answer is not text")
        return answer
