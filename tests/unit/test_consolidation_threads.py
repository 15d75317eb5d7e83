"""Decisions in topics (ADR-018, amendment of 2026-11-29): clustered with the topic types,
kept in a topic only beside an episode, always merged, told with their rationale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from engram.memory.consolidation import actions
from engram.memory.consolidation.actions import ActionParams, choose
from engram.memory.consolidation.candidates import Loaded, topics_of
from engram.memory.consolidation.model import ConsolidationAction
from engram.memory.consolidation.topics import TopicParams
from engram.memory.types import MemoryRecord, MemoryType

DAY = datetime(2026, 3, 1, 9, tzinfo=UTC)


def _record(kind: MemoryType, text: str, day: int = 0, rationale: str = "") -> MemoryRecord:
    return MemoryRecord.draft(
        kind,
        text,
        source_agent="a",
        event_time=DAY + timedelta(days=day),
        metadata={"rationale": rationale} if rationale else {},
    )


def _loaded(records: list[MemoryRecord]) -> list[Loaded]:
    vector = np.ones(8, dtype=np.float32)  # every pair alike: one topic if allowed
    return [Loaded(record, vector) for record in records]


def _sorted(topics: list[list[int]]) -> list[list[int]]:
    return sorted(sorted(topic) for topic in topics)


def test_a_decision_joins_the_episodes_of_its_thread() -> None:
    """A decision alike its thread's episodes is clustered with them."""
    records = [
        _record(MemoryType.EPISODE, "Kiln 2 cracked a shelf during the Tuesday firing.", 0),
        _record(MemoryType.DECISION, "Replace the kiln 2 shelves with silicon carbide.", 1, "x"),
        _record(MemoryType.EPISODE, "New silicon carbide shelves fitted in kiln 2.", 3),
    ]
    assert _sorted(topics_of(_loaded(records), [], TopicParams())) == [[0, 1, 2]]


def test_decisions_without_an_episode_are_topics_of_their_own() -> None:
    """Without an episode beside them, decisions leave the topic, each alone."""
    records = [
        _record(MemoryType.DECISION, "Replace the kiln 2 shelves with silicon carbide.", 0, "x"),
        _record(MemoryType.DECISION, "Order silicon carbide shelves for kiln 2.", 1, "y"),
        _record(MemoryType.BELIEF, "Kiln 2 shelves crack when fired above cone 6.", 2),
    ]
    assert _sorted(topics_of(_loaded(records), [], TopicParams())) == [[0], [1], [2]]


def test_a_decision_beside_one_episode_stays_alone() -> None:
    """One episode and a decision alike are no thread: the decision is left alone."""
    records = [
        _record(MemoryType.EPISODE, "Kiln 2 cracked a shelf during the Tuesday firing.", 0),
        _record(MemoryType.DECISION, "Replace the kiln 2 shelves with silicon carbide.", 1, "x"),
    ]
    assert _sorted(topics_of(_loaded(records), [], TopicParams())) == [[0], [1]]


def test_other_types_stay_alone_as_before() -> None:
    """A preference is still never clustered, however alike."""
    records = [
        _record(MemoryType.EPISODE, "Kiln 2 cracked a shelf during the Tuesday firing.", 0),
        MemoryRecord.draft(
            MemoryType.PREFERENCE,
            "Kiln 2 shelves: the potter prefers silicon carbide.",
            source_agent="a",
            event_time=DAY,
            metadata={"subject": "kiln 2 shelves"},
        ),
    ]
    assert _sorted(topics_of(_loaded(records), [], TopicParams())) == [[0], [1]]


def test_a_topic_holding_a_decision_is_merged_though_alike_enough_to_promote() -> None:
    """A decision is no observation: a topic holding one is merged, not promoted."""
    sources = [
        _record(MemoryType.EPISODE, "The kiln 2 shelf cracked again.", 0),
        _record(MemoryType.DECISION, "Kiln 2 shelves to be replaced.", 1, "x"),
        _record(MemoryType.EPISODE, "Another kiln 2 shelf cracked again.", 2),
    ]
    vectors = np.ones((3, 8), dtype=np.float32)
    assert choose(sources, vectors, ActionParams()) is ConsolidationAction.MERGE
    episodes = [sources[0], sources[2], _record(MemoryType.EPISODE, "Cracked again.", 3)]
    assert choose(episodes, vectors, ActionParams()) is ConsolidationAction.PROMOTE


def test_a_merged_decision_is_told_with_its_rationale() -> None:
    """In a merge, a decision's text carries its rationale, once."""
    decision = _record(
        MemoryType.DECISION, "Replace the kiln 2 shelves.", 1, "they crack at cone 6"
    )
    texts = actions.source_texts([decision], ConsolidationAction.MERGE)
    assert texts[0].text == "Replace the kiln 2 shelves. Rationale: they crack at cone 6."
    # a compressed decision keeps its metadata, so its text is its own
    alone = actions.source_texts([decision], ConsolidationAction.COMPRESS)
    assert alone[0].text == "Replace the kiln 2 shelves."
    # a rationale the content already states is not said twice
    said = _record(
        MemoryType.DECISION, "Replace them: they crack at cone 6.", 1, "they crack at cone 6"
    )
    assert actions.source_texts([said], ConsolidationAction.MERGE)[0].text == said.content
