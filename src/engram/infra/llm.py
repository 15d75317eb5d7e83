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
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from engram.errors import InfrastructureError

#: The most of an answer that is read. A summary is at most 16,000 characters (the record's
#: limit), which JSON may spell in up to six bytes each; an endpoint sending more is cut off
#: there. Read whole, a huge answer grew the kernel's memory and then held its event loop
#: for minutes in the summary's checks.
MAX_ANSWER_BYTES = 256 * 1024


class LLMUnavailable(InfrastructureError):
    """The LLM endpoint did not give a usable answer."""


async def _limited(response: httpx.Response) -> bytes:
    """The body of ``response``, unless it is longer than ``MAX_ANSWER_BYTES``."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise LLMUnavailable("summariser answer too large")
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise LLMUnavailable("summariser answer too large")
        chunks.append(chunk)
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
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
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
        except (httpx.HTTPError, TimeoutError, ValueError, RecursionError) as exc:
            raise LLMUnavailable(f"summariser endpoint failed: {type(exc).__name__}") from exc
        try:
            answer = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailable("summariser answer has no choices[0].message.content") from exc
        if not isinstance(answer, str):
            raise LLMUnavailable("summariser answer is not text")
        return answer
