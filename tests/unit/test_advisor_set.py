"""The labelled advisor set (tests/data/advisor): well formed, halves apart."""

from __future__ import annotations

from collections import Counter

from benchmarks.advisor_eval import ACTIONS, HALVES, load
from engram.memory.types import MemoryType


def test_each_item_names_a_stored_target_exactly_when_it_should() -> None:
    """NOOP and UPDATE name a record of their store; ADD names none; types are real."""
    for half in ("dev", "test"):
        for item in load(HALVES / f"{half}.jsonl"):
            keys = {stored["key"] for stored in item["store"]}
            assert item["label"] in ACTIONS, item["id"]
            assert (item["target"] is None) == (item["label"] == "ADD"), item["id"]
            assert item["target"] is None or item["target"] in keys, item["id"]
            assert len(keys) == len(item["store"]), item["id"]
            MemoryType(item["proposal"]["type"])


def test_the_halves_share_no_item_and_cover_every_type_and_action() -> None:
    """At least 150 items a half, every memory type and action in each, no shared id."""
    dev, test = load(HALVES / "dev.jsonl"), load(HALVES / "test.jsonl")
    for half in (dev, test):
        assert True is (len(half) >= 150)
        assert set(MemoryType) == {MemoryType(i["proposal"]["type"]) for i in half}
        assert set(ACTIONS) == set(Counter(i["label"] for i in half))
    assert set() == {i["id"] for i in dev} & {i["id"] for i in test}
