"""Hostile pass AA: findings, each a test that failed before its fix (see each docstring)."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable

import pytest

from engram import Kernel
from engram.infra.llm import LLMUnavailable, OpenAICompatibleGenerator
from engram.memory.types import AccessLevel
from tests.integration.consolidation_helpers import DEEP
from tests.integration.pass_y_helpers import Summariser, llm_engine, summariser, topics
from tests.integration.test_hostile_pass_s import Receiver

#: What the fake endpoint writes after reading a request: the whole response, as bytes.
Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


def _answer(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"content": content}}]}).encode()


def _chunked(encoding: str, pieces: list[bytes], tail: bytes = b"", repeat: int = 0) -> Answer:
    """A chunked response in ``encoding``: ``pieces`` each as its own chunk, then ``tail``
    as ``repeat`` more chunks."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nContent-Encoding: " + encoding.encode() + b"\r\n\r\n"
        )
        for piece in [*pieces, *([tail] * repeat)]:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return answer


async def _complete(answer: Answer) -> str:
    async with Receiver(answer) as url:
        generator = OpenAICompatibleGenerator(url, model="m", timeout_seconds=10)
        return await generator.complete("say", "text")


@pytest.mark.parametrize("pack", [gzip.compress, zlib.compress], ids=["gzip member", "zlib stream"])
async def test_bytes_after_the_end_of_a_compressed_answer_are_refused_unread(
    pack: Callable[[bytes], bytes],
) -> None:
    """A complete compressed answer followed by 8 MiB more on the wire.
    Rule: no answer takes more memory than the answer limit allows, however it is encoded,
    and a malformed answer is refused (``LLMUnavailable``, the summariser falls back).
    Failed before: zlib keeps every byte after the end of its stream (``unused_data``,
    copied whole on each read), which the limit never counted: this answer was used as
    "a summary" after a traced peak of 20 MB; 32 MiB held the call to its timeout, and
    200 MiB grew past 100 MB before it. Fixed in ``infra/llm.py`` (``_limited``): a byte
    after the end of the compressed stream refuses the answer as it arrives."""
    encoding = "gzip" if pack is gzip.compress else "deflate"
    answer = _chunked(encoding, [pack(_answer("a summary"))], b"\0" * 2**20, repeat=8)
    tracemalloc.start()
    try:
        with pytest.raises(LLMUnavailable, match="after its end"):
            await _complete(answer)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak


async def test_a_compressed_answer_cut_short_is_refused() -> None:
    """A gzip answer whose stream ends before gzip's trailer (its length and CRC).
    Rule: an answer the endpoint did not finish is not used; the summariser falls back.
    Failed before: whatever had been inflated was used, never checked (the answer here
    was read as "a summary"). Fixed in ``infra/llm.py`` (``_limited``): a compressed
    answer whose stream did not end is refused."""
    whole = gzip.compress(_answer("a summary"))
    with pytest.raises(LLMUnavailable, match="cut short"):
        await _complete(_chunked("gzip", [whole[:-8]]))


async def test_a_zlib_deflate_answer_whose_first_read_is_one_byte_is_decoded() -> None:
    """``deflate`` with zlib's header, sent in chunks of which the first holds one byte.
    Rule: an answer is understood however the endpoint splits it on the wire.
    Failed before: ``_Deflate`` judged the header from the first read alone, took one
    byte for raw deflate, and the valid answer was refused (``zlib.error``). Fixed in
    ``infra/llm.py``: the header is judged once two bytes have arrived."""
    packed = zlib.compress(_answer("a summary"))
    assert await _complete(_chunked("deflate", [packed[:1], packed[1:]])) == "a summary"


async def test_batches_committed_before_a_pass_is_cancelled_are_counted(kernel: Kernel) -> None:
    """Three topics of the agent level, a batch each; the outside model holds the third
    topic's summary, by when the first topic's batch has committed. The pass is cancelled
    there. Rule: ``engram_consolidation_batches_total`` counts every batch that committed,
    whatever ends the pass after it (the operator's alerts read it). Failed before: a level
    whose planning ended in an error or a cancellation counted none of its batches, though
    they stayed committed. Fixed in ``engine.py`` (``Committer.abandon`` returns the batches
    that had ended, and the engine counts them)."""
    await topics(kernel, 3)
    with summariser(Summariser(special=3)) as model:
        engine = llm_engine(kernel, model.url, batch_size=3)
        running = asyncio.create_task(engine.run(DEEP))
        await model.reached()
        for _ in range(500):
            if await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches"):
                break
            await asyncio.sleep(0.02)
        running.cancel()
        done = await asyncio.gather(running, return_exceptions=True)
        assert isinstance(done[0], asyncio.CancelledError)
    committed = await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches")
    assert committed >= 1
    counted = kernel.metrics.registry.get_sample_value(
        "engram_consolidation_batches_total",
        {"trigger": DEEP.value, "access_level": AccessLevel.AGENT.value, "outcome": "committed"},
    )
    assert counted == committed
