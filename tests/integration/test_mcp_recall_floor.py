"""The default similarity floor of recall, on the labelled query set with the real model
(issue 17): chosen on the dev half, reported on the test half."""

from __future__ import annotations

from uuid import UUID

from benchmarks.recall_floor_eval import (
    SET,
    evaluate,
    measure,
    read_jsonl,
    returned,
    search_all,
    store,
)
from engram import Kernel
from engram.memory.types import TrustLevel
from engram.protocols.mcp.tools import EngramTools
from engram.retrieval.search import DEFAULT_MIN_SCORE

#: Below what the test half measured when the floor was chosen (F1 0.8172, 94 % of unrelated
#: queries answered with nothing): a guard against regressions, not a goal.
TEST_BALANCED_FLOOR = 0.84
TEST_EMPTY_FLOOR = 0.8
TEST_ANSWERED_FLOOR = 0.85


def test_the_halves_share_no_query_and_name_only_stored_memories() -> None:
    """Both halves hold related and unrelated queries, no query is in both, and every label
    names a memory of the set."""
    keys = {row["key"] for row in read_jsonl(SET / "memories.jsonl")}
    dev, test = read_jsonl(SET / "dev.jsonl"), read_jsonl(SET / "test.jsonl")
    assert set() == {r["query"] for r in dev} & {r["query"] for r in test}
    assert set() == {r["id"] for r in dev} & {r["id"] for r in test}
    for half in (dev, test):
        assert 30 <= sum(1 for r in half if not r["relevant"])
        assert 40 <= sum(1 for r in half if r["relevant"])
        assert set() == {key for r in half for key in r["relevant"]} - keys


async def test_the_default_floor_is_the_one_the_dev_half_chooses(kernel: Kernel) -> None:
    """Choosing on the dev half again gives DEFAULT_MIN_SCORE."""
    result = await evaluate(kernel, "dev", pick=True, floor=0.0)
    assert DEFAULT_MIN_SCORE == result["floor"], result


async def test_recall_on_the_test_half_returns_what_the_evaluation_counts(kernel: Kernel) -> None:
    """The recall tool with its defaults returns, for each held-out query, the hits the
    evaluation scores; the shares of answerable queries answered and of unrelated queries
    answered with nothing stay above their guards (measured: 0.88 and 0.85)."""
    keys = await store(kernel)
    queries = await search_all(kernel, keys, "test")
    tools = EngramTools(kernel)
    _, token = await kernel.agents.add("floor-reader", TrustLevel.STANDARD)
    reader = await kernel.agents.authenticate(token)
    for query in queries:
        result = await tools.call("recall", {"query": query.text}, reader)
        assert isinstance(result.structured_content, dict)
        hits = result.structured_content["hits"]
        shown = [keys[UUID(hit["record"]["record_id"])] for hit in hits]
        assert returned(query, DEFAULT_MIN_SCORE) == shown, query.text
    figures = measure(queries, DEFAULT_MIN_SCORE)
    assert True is (figures["balanced"] >= TEST_BALANCED_FLOOR), figures
    assert True is (figures["answered"] >= TEST_ANSWERED_FLOOR), figures
    assert True is (figures["empty_when_unrelated"] >= TEST_EMPTY_FLOOR), figures
