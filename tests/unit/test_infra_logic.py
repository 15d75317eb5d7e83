"""Pure parts of the infrastructure: the SQL file loader, the batching embedder, audit hashes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from engram.infra.embedding_batcher import BatchingEmbedder
from engram.infra.fastembed_embedder import length_groups
from engram.infra.sql import load_queries, parse_queries
from engram.memory.audit.log import AuditEntry, canonical_json, genesis_hash


def test_sql_blocks_are_named_and_fragments_included() -> None:
    """Statements are found by name and ``{{fragment}}`` is replaced by its block."""
    queries = parse_queries(
        "-- fragment: cols\nid, name\n\n-- name: get_one\nSELECT {{cols}} FROM t WHERE id = $1\n"
    )
    assert {"get_one": "SELECT id, name FROM t WHERE id = $1"} == dict(queries)


def test_sql_duplicates_and_unknown_fragments_are_errors() -> None:
    """A name defined twice, or a missing fragment, fails loudly at load time."""
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(ValueError, match="unknown SQL fragment"):
        parse_queries("-- name: a\nSELECT {{nope}}\n")


def test_shipped_sql_files_parse() -> None:
    """The statements the memory code uses exist in the packaged files."""
    versions = load_queries("engram.memory.store", "versions.sql")
    audit = load_queries("engram.memory.audit", "audit.sql")
    assert {"head", "candidates", "insert_version", "close_head", "forget_head"} <= set(versions)
    assert {"append_entry", "page_after", "hold_lane_heads", "insert_checkpoint"} <= set(audit)
    assert all("{{" not in sql for sql in [*versions.values(), *audit.values()])


class CountingEmbedder:
    """A fake embedding port that records the batch sizes it was asked for."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[int] = []
        self.fail = fail

    @property
    def dimension(self) -> int:
        return 2

    @property
    def model_name(self) -> str:
        return "fake"

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed_batch([text]))[0]

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("model down")
        return [[float(len(text)), 1.0] for text in texts]

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_concurrent_requests_are_batched_and_answered_in_order() -> None:
    """Twenty concurrent calls become a few batches, each caller gets its own vector."""
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, max_batch=8, max_in_flight=1)
    texts = ["x" * n for n in range(1, 21)]
    vectors = await asyncio.gather(*(batcher.embed_one(t) for t in texts))
    assert [[float(n), 1.0] for n in range(1, 21)] == vectors
    assert 20 == sum(inner.batches)
    assert max(inner.batches) <= 8
    assert len(inner.batches) < 20


async def test_batches_run_in_parallel_up_to_the_limit() -> None:
    """With two batches allowed in flight, two start before the first finishes."""
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, max_batch=1, max_in_flight=2)
    started = asyncio.get_running_loop().time()
    await asyncio.gather(*(batcher.embed_one("t") for _ in range(4)))
    assert asyncio.get_running_loop().time() - started < 0.035


async def test_a_failed_batch_fails_each_of_its_callers() -> None:
    """An error of the model reaches every waiter of that batch."""
    batcher = BatchingEmbedder(CountingEmbedder(fail=True), max_batch=4)
    results = await asyncio.gather(
        *(batcher.embed_one("t") for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)


def test_length_groups_cover_every_text_once_with_a_bounded_spread() -> None:
    """Each text lands in exactly one group, and no group pads its shortest by over 15 %."""
    texts = ["w" * n for n in (90, 12, 40, 41, 100, 13, 44, 300, 12, 95)]
    groups = length_groups(texts)
    assert list(range(len(texts))) == sorted(i for group in groups for i in group)
    for group in groups:
        lengths = [len(texts[i]) for i in group]
        assert max(lengths) <= 1.15 * min(lengths)
    assert [[1, 8, 5], [2, 3, 6], [0, 9, 4], [7]] == groups


def test_length_groups_of_equal_or_no_texts() -> None:
    """Texts of one length form one group; no texts form no group."""
    assert [[0, 1, 2]] == length_groups(["abc", "def", "ghi"])
    assert [] == length_groups([])
    assert [[0, 1]] == length_groups(["", "a"])


def _entry(**changes: object) -> AuditEntry:
    base: dict[str, object] = {
        "decision_id": uuid.UUID(int=5),
        "request_id": "r1",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
        "action": "CREATE",
        "decision": "approved",
        "outcome": "created",
        "decision_type": "external",
        "reason": "ok",
        "agent_id": "a",
        "caller": "{}",
        "record_id": None,
        "version_id": None,
        "input_snapshot": canonical_json({"b": 1, "a": [1, 2]}),
        "layer1_checks": "[]",
        "layer2_decision": None,
        "decision_source": "heuristic@1",
        "duration_ms": 1.5,
    }
    base.update(changes)
    return AuditEntry(**base)  # type: ignore[arg-type]


def test_audit_hash_depends_on_every_field_and_on_the_previous_hash() -> None:
    """Changing any field, or the link, changes the digest; the lane follows the decision id."""
    entry = _entry()
    digest = entry.digest(genesis_hash(entry.lane), seq=7)
    assert 5 == entry.lane
    assert digest == _entry().digest(genesis_hash(5), seq=7)
    assert digest != entry.digest(genesis_hash(6), seq=7)
    for field, value in [("reason", "ok!"), ("agent_id", "b"), ("duration_ms", 1.6),
                         ("layer2_decision", "{}"), ("request_id", None)]:  # fmt: skip
        assert digest != _entry(**{field: value}).digest(genesis_hash(5), seq=7), field


def test_audit_hash_covers_seq_from_format_2_only() -> None:
    """A format-2 hash changes with the row's seq and differs from the format-1 hash of the
    same row; a format-1 hash, written before seq was hashed, does not depend on it."""
    entry, link = _entry(), genesis_hash(5)
    assert entry.digest(link, seq=7) != entry.digest(link, seq=8)
    assert entry.digest(link, seq=7) != entry.digest(link, seq=7, version=1)
    assert entry.digest(link, seq=7, version=1) == entry.digest(link, seq=8, version=1)
    with pytest.raises(ValueError, match="format 3"):
        entry.digest(link, seq=7, version=3)


def test_canonical_json_is_stable() -> None:
    """Keys are sorted, separators compact, non-ASCII kept."""
    assert '{"a":[1,2],"b":"é"}' == canonical_json({"b": "é", "a": [1, 2]})
