"""Hostile pass AH, end to end: `engram mcp` over stdio as a child process, the embedding
model in real worker processes, and a grant the database withdraws (the integration half,
tests/integration/test_hostile_pass_ah.py, has the rest of the pass and its list of faults).

Found here (each test failed before its fix):

- over stdio, a ``remember`` whose metadata nested 300 levels deep was ``-32600 not a
  JSON-RPC 2.0 message`` and 1200 levels ``-32700 not JSON text in UTF-8``, with ``id: null``
  and no audit row, where REST refuses it with an audited 422;
- a stdio line that is not UTF-8 was decoded with replacement characters and the record was
  stored so mangled;
- an argument holding an integer of more than 4,300 digits made the whole message a parse
  error (``-32700``, ``id: null``) on both MCP transports, unaudited;
- with the runtime role's INSERT on the audit log revoked (the specification's audit-write
  failure, made real), REST answered 500 where MCP says ``unavailable``;
- loading the model ran under ``ENGRAM_EMBEDDING_TIMEOUT_SECONDS`` (one call's limit): with a
  limit below the loading time the warm-up failed, and with worker processes one overrun was
  never recovered from (each call killed the replacement worker while it loaded).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engram.errors import EmbeddingTimeout
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.inprocess_embedder import InProcessEmbedder
from engram.memory.types import TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.test_hostile_pass_ah import (
    FACT,
    _call,
    _mcp,
    _nested,
    _refused_for_nesting,
)
from tests.integration.test_hostile_pass_b import start_stdio_mcp
from tests.integration.test_http_api import Api
from tests.integration.test_http_fuzz import _count

pytestmark = pytest.mark.slow

api = http_api.api

_INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"hostile-ah","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


def _stdio_answers(
    database: ScratchDatabase,
    model_dir: Any,
    lines: list[str],
    last_id: int,
    *,
    encoding: str = "utf-8",
) -> list[dict[str, Any]]:
    """Run `engram mcp` for a new agent, send ``lines`` (in ``encoding``) after initialising,
    and collect every answer until the one to ``last_id`` (90 s at most)."""

    process = start_stdio_mcp(database, model_dir, "stdio-deep")
    assert process.stdin is not None
    assert process.stdout is not None
    answers: list[dict[str, Any]] = []
    try:
        process.stdin.write(_INIT + "".join(line + "\n" for line in lines).encode(encoding))
        process.stdin.flush()
        reader = threading.Thread(
            target=lambda: answers.extend(json.loads(raw) for raw in process.stdout or ()),
            daemon=True,
        )
        reader.start()
        deadline = time.monotonic() + 90
        while last_id not in [a.get("id") for a in answers] and time.monotonic() < deadline:
            time.sleep(0.1)
        process.stdin.close()
        process.wait(30)
        reader.join(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        process.stdout.close()
    return answers


def test_deep_metadata_over_mcp_stdio_is_refused_by_the_gate_and_audited(
    database: ScratchDatabase, model_dir: Any
) -> None:
    """Over stdio, 300 levels were -32600 "not a JSON-RPC 2.0 message" and 1200 were -32700
    "not JSON text in UTF-8", both with id null and unaudited."""
    before = asyncio.run(_count(database))
    lines = [
        _call(
            depth, "remember", f'{{"type":"belief","content":"{FACT}","metadata":{_nested(depth)}}}'
        )
        for depth in (300, 1200)
    ]
    answers = _stdio_answers(database, model_dir, lines, 1200)
    by_id = {answer.get("id"): answer for answer in answers}
    assert None not in by_id, by_id.get(None)
    for depth in (300, 1200):
        _refused_for_nesting(by_id[depth], depth)
    assert (before[0] + 2, before[1]) == asyncio.run(_count(database))


#: A time limit far above one embedding by a loaded worker (milliseconds) and below what a
#: new worker takes to start and load the model (a second or more).
SHORT_LIMIT = 0.5
MODEL = "sentence-transformers/all-MiniLM-L6-v2-int8"


async def _embeds_within(embedder: FastembedEmbedder | InProcessEmbedder, seconds: float) -> int:
    """Call the embedder until a call answers (at most ``seconds``); the calls that failed."""
    failed, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            assert 384 == len(await embedder.embed_one("the ledger runs on PostgreSQL"))
        except EmbeddingTimeout:
            failed += 1
            continue
        return failed
    raise AssertionError(f"no call answered in {seconds} s ({failed} timed out)")


async def test_model_workers_start_under_a_time_limit_shorter_than_their_loading(
    model_dir: Path,
) -> None:
    """ENGRAM_EMBEDDING_TIMEOUT_SECONDS limits one embedding; the warm-up counted the
    worker's start and the model's loading against it too, so `engram serve` with workers
    and a limit of a second or two exited at startup (EmbeddingTimeout)."""
    embedder = FastembedEmbedder(
        model_dir, model_name=MODEL, workers=1, timeout_seconds=SHORT_LIMIT
    )
    try:
        await embedder.start()
        assert 384 == len(await embedder.embed_one("a loaded worker answers within the limit"))
    finally:
        await embedder.close()


async def test_the_model_in_process_starts_under_a_time_limit_shorter_than_its_loading(
    model_dir: Path,
) -> None:
    """The same for the model on a thread of the kernel's process (the default)."""
    embedder = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=0.05)
    try:
        await embedder.start()
        assert 384 == len(await embedder.embed_one("loaded"))
    finally:
        await embedder.close()


async def test_a_stopped_worker_is_replaced_by_one_that_gets_to_load(model_dir: Path) -> None:
    """docs/operations.md: an overrunning worker "is killed and replaced". With a limit below
    the loading time the replacement was killed too, by the next call's timeout, while it
    was still loading, and so was every one after it: once a worker had overrun (here it is
    stopped with SIGSTOP), no embedding ever succeeded again and every write went on without
    a vector. A timeout while the replacement loads now leaves it loading."""
    embedder = FastembedEmbedder(model_dir, model_name=MODEL, workers=1, timeout_seconds=30)
    try:
        await embedder.start()
        stopped = embedder.worker_pids()
        embedder._timeout = SHORT_LIMIT
        os.kill(stopped[0], signal.SIGSTOP)
        with pytest.raises(EmbeddingTimeout):
            await embedder.embed_one("the stopped worker never answers")
        await _embeds_within(embedder, 60)
        assert stopped != embedder.worker_pids()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped[0], signal.SIGKILL)
        await embedder.close()


async def test_a_new_worker_is_not_killed_while_it_loads(model_dir: Path) -> None:
    """The first calls of a pool that is still loading time out (the write goes on without
    a vector, as documented), and a later call is answered by the same worker."""
    embedder = FastembedEmbedder(
        model_dir, model_name=MODEL, workers=1, timeout_seconds=SHORT_LIMIT
    )
    try:
        with pytest.raises(EmbeddingTimeout):
            await embedder.embed_one("the pool starts now and loads the model")
        first = embedder.worker_pids()
        await _embeds_within(embedder, 60)
        assert first == embedder.worker_pids()
    finally:
        await embedder.close()


def test_a_stdio_line_that_is_not_utf8_is_a_parse_error_not_a_record_with_replacement_marks(
    database: ScratchDatabase, model_dir: Any
) -> None:
    """Over stdio a line was decoded with replacement characters, so a ``remember`` sent in
    Latin-1 stored "The Caf\\ufffd Lumi\\ufffdre opens at nine." and acknowledged it, where
    streamable HTTP answers the same bytes -32700 (and REST 400). It is -32700 now, nothing
    is stored, and the session goes on."""
    before = asyncio.run(_count(database))
    arguments = {"type": "belief", "content": "The Café Lumière opens at nine."}
    latin = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 21,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": arguments},
        },
        ensure_ascii=False,
    ).encode("latin-1")
    answers = _stdio_answers(
        database,
        model_dir,
        [latin.decode("latin-1"), '{"jsonrpc":"2.0","id":22,"method":"tools/list"}'],
        22,
        encoding="latin-1",
    )
    assert 21 not in [a.get("id") for a in answers], answers
    errors = [a["error"] for a in answers if "error" in a]
    assert [-32700] == [error["code"] for error in errors], answers
    assert 22 in [a.get("id") for a in answers]
    assert before == asyncio.run(_count(database))


async def test_a_write_the_audit_log_refuses_is_unavailable_on_rest_as_on_mcp(
    api: Api, database: ScratchDatabase
) -> None:
    """The specification's audit-write-failure row, made real: the runtime role loses INSERT
    on the audit table (an operator's grant gone wrong). The write is refused and nothing is
    stored on every adapter (the audit is fail-closed, ADR-005), /readyz says the audit log
    fails, MCP answers ``unavailable``, the CLI exits 5 (infrastructure), but REST answered
    ``500 internal error``. It answers ``503 unavailable`` with ``Retry-After`` now."""
    headers = await api.agent("audited", TrustLevel.STANDARD)
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE INSERT ON engram.librarian_audit FROM engram_runtime")
        before = await _count(database)
        rest = await api.write({"type": "belief", "content": FACT}, headers)
        assert (503, "urn:engram:problem:unavailable") == (
            rest.status_code,
            rest.json()["type"],
        ), rest.text
        assert "Retry-After" in rest.headers
        answer = await _mcp(
            api, headers, _call(17, "remember", json.dumps({"type": "belief", "content": FACT}))
        )
        assert "unavailable" == answer["result"]["structuredContent"]["error"]["kind"]
        assert before == await _count(database)
    finally:
        await admin.execute("GRANT INSERT ON engram.librarian_audit TO engram_runtime")
        await admin.close()
    assert 201 == (await api.write({"type": "belief", "content": FACT}, headers)).status_code


@pytest.mark.parametrize("field", ["metadata", "source_confidence"])
async def test_an_integer_too_long_to_read_over_mcp_is_an_audited_rejection(
    api: Api, database: ScratchDatabase, field: str
) -> None:
    """REST refuses a body holding an integer of more than 4,300 digits with an audited 422;
    MCP answered ``-32700 number out of range`` with ``id: null``, unaudited."""
    headers = await api.agent("digits", TrustLevel.STANDARD)
    digits = "7" * 5000
    value = f'{{"n":{digits}}}' if field == "metadata" else digits
    arguments = f'{{"type":"belief","content":"{FACT}","{field}":{value}}}'
    before = await _count(database)
    answer = await _mcp(api, headers, _call(18, "remember", arguments))
    assert 18 == answer.get("id"), answer
    result = answer["result"]["structuredContent"]
    assert ("rejected", True) == (result["decision"], field in result["reason"]), result
    assert (before[0] + 1, before[1]) == await _count(database)


def test_an_integer_too_long_to_read_over_stdio_is_an_audited_rejection(
    database: ScratchDatabase, model_dir: Any
) -> None:
    """The same over stdio, which answered ``-32700 not JSON text in UTF-8``, ``id: null``."""
    before = asyncio.run(_count(database))
    arguments = f'{{"type":"belief","content":"{FACT}","metadata":{{"n":{"7" * 5000}}}}}'
    answers = _stdio_answers(database, model_dir, [_call(19, "remember", arguments)], 19)
    answer = {a.get("id"): a for a in answers}[19]
    result = answer["result"]["structuredContent"]
    assert ("rejected", True) == (result["decision"], "metadata" in result["reason"]), result
    assert (before[0] + 1, before[1]) == asyncio.run(_count(database))
