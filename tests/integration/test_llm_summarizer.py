"""The optional LLM summariser against a real HTTP endpoint on loopback (ADR-018)."""

from __future__ import annotations

import gzip
import json
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engram.infra.llm import LLMUnavailable, OpenAICompatibleGenerator
from engram.memory.consolidation.summarize import (
    CheckedSummarizer,
    ExtractiveSummarizer,
    SourceText,
    Style,
)

SOURCES = [
    SourceText("Rolled checkout-api back to v4.2.0 at 02:31.", datetime(2026, 4, 2, tzinfo=UTC)),
    SourceText("Root cause: the pool was capped at 20.", datetime(2026, 4, 3, tzinfo=UTC)),
]


class _Endpoint:
    """What the fake model answers next, and what it was asked."""

    def __init__(self) -> None:
        self.status = 200
        self.answer: Any = "ok"
        self.requests: list[dict[str, Any]] = []
        #: sent as the body instead of the answer's JSON when set, with this Content-Encoding
        self.body: bytes | None = None
        self.encoding: str | None = None


@pytest.fixture
def endpoint() -> Iterator[tuple[_Endpoint, str]]:
    """An OpenAI-compatible /v1/chat/completions on a loopback port."""
    state = _Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            state.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"),
                 "accept_encoding": self.headers.get("Accept-Encoding"),
                 "body": json.loads(self.rfile.read(length))}
            )  # fmt: skip
            body = (
                state.body
                or json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": state.answer}}]}
                ).encode()
            )
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            if state.encoding:
                self.send_header("Content-Encoding", state.encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _summarizer(base_url: str) -> CheckedSummarizer:
    generator = OpenAICompatibleGenerator(base_url, model="tiny", api_key="k", timeout_seconds=5)
    return CheckedSummarizer(generator, ExtractiveSummarizer())


async def test_an_answer_that_keeps_every_fact_is_used(endpoint: tuple[_Endpoint, str]) -> None:
    """The model's text is stored when every number, version and name survives."""
    state, url = endpoint
    state.answer = "checkout-api went back to v4.2.0 at 02:31; the pool had been capped at 20."
    summary = await _summarizer(url).summarize(SOURCES, Style.NARRATIVE)
    assert (summary.text, summary.summarizer) == (state.answer, "llm:tiny")
    (asked,) = state.requests
    assert asked["path"] == "/v1/chat/completions"
    assert asked["auth"] == "Bearer k"
    assert asked["body"]["model"] == "tiny"
    assert "v4.2.0" in asked["body"]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (200, "checkout-api went back to v4.2.1 at 02:31; pool capped at 20."),  # a fact changed
        (200, "checkout-api back to v4.2.0 at 02:31 (pool capped at 20) per Dana Ruiz."),  # added
        (200, ""),  # nothing said
        (500, "checkout-api v4.2.0 02:31 20"),  # the endpoint failed
        (200, None),  # no text in the answer
    ],
)
async def test_any_other_answer_falls_back_to_the_extractive_text(
    endpoint: tuple[_Endpoint, str], status: int, answer: Any
) -> None:
    """A lost or invented fact, an empty answer, an error status or a malformed answer:
    the extractive text."""
    state, url = endpoint
    state.status, state.answer = status, answer
    summary = await _summarizer(url).summarize(SOURCES, Style.NARRATIVE)
    assert summary.summarizer == "extractive@1"
    assert summary.text == ExtractiveSummarizer().text(SOURCES, Style.NARRATIVE)


async def test_an_unreachable_endpoint_is_an_infrastructure_error() -> None:
    """A closed port raises LLMUnavailable (the summariser then falls back)."""
    generator = OpenAICompatibleGenerator("http://127.0.0.1:9/v1", model="m", timeout_seconds=2)
    with pytest.raises(LLMUnavailable):
        await generator.complete("say", "text")


def _answer(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"content": content}}]}).encode()


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", _raw_deflate)],
)
async def test_a_compressed_answer_is_decoded(
    endpoint: tuple[_Endpoint, str], encoding: str, pack: Any
) -> None:
    """The request asks for no compression; an endpoint that compresses anyway (gzip,
    deflate with or without zlib's header) is still understood."""
    state, url = endpoint
    state.body, state.encoding = pack(_answer("a summary")), encoding
    generator = OpenAICompatibleGenerator(url, model="m", timeout_seconds=5)
    assert await generator.complete("say", "text") == "a summary"
    assert state.requests[0]["accept_encoding"] == "identity"


async def test_a_compressed_answer_is_not_inflated_past_the_limit(
    endpoint: tuple[_Endpoint, str],
) -> None:
    """64 MiB of answer gzipped into about 64 KiB, which arrives in one or two reads.
    Rule: no answer takes more memory than the answer limit allows, however it is encoded.
    Failed before: httpx inflated each read whole before the limit saw it, so one read
    became tens of MiB at once (a traced peak of 149 MB). Fixed in ``infra/llm.py``: the
    answer is inflated here, never more than the limit at a time (a peak of 1.8 MB)."""
    state, url = endpoint
    state.body = gzip.compress(_answer(" " * (64 * 2**20)), compresslevel=9)
    state.encoding = "gzip"
    generator = OpenAICompatibleGenerator(url, model="m", timeout_seconds=10)
    tracemalloc.start()
    try:
        with pytest.raises(LLMUnavailable, match="too large"):
            await generator.complete("say", "text")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak


async def test_an_answer_in_an_encoding_it_cannot_read_is_refused(
    endpoint: tuple[_Endpoint, str],
) -> None:
    """An encoding other than gzip or deflate (brotli here) is an infrastructure error, so
    the summariser falls back, rather than text read as if it were not encoded."""
    state, url = endpoint
    state.body, state.encoding = b"\x8b\x02\x80not brotli", "br"
    generator = OpenAICompatibleGenerator(url, model="m", timeout_seconds=5)
    with pytest.raises(LLMUnavailable, match="encoding"):
        await generator.complete("say", "text")
