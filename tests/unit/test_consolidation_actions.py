"""Consolidation actions: steps, the action rules, confidence, type and access level."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import numpy as np
import pytest

from engram.memory.consolidation.actions import (
    ActionParams,
    choose,
    combined_confidence,
    level_of,
    merged_steps,
    output_type,
    repeated_steps,
    steps_of,
)
from engram.memory.consolidation.model import ConsolidationAction
from engram.memory.types import AccessLevel, MemoryRecord, MemoryType

DAY1 = datetime(2024, 1, 1, 9, tzinfo=UTC)
DAY2 = datetime(2024, 1, 2, 9, tzinfo=UTC)
PROCEDURE = (
    "Stop the service, drain the queue, run migration 42, restart the service, check /health"
)


def record(
    text: str = "note",
    *,
    type_: MemoryType = MemoryType.EPISODE,
    agent: str = "a",
    when: datetime | None = DAY1,
    confidence: float | None = None,
    level: AccessLevel = AccessLevel.AGENT,
) -> MemoryRecord:
    """A draft record with the given fields."""
    return MemoryRecord.draft(
        type_,
        text,
        source_agent=agent,
        event_time=when,
        source_confidence=confidence,
        access_level=level,
    )


def alike(n: int) -> np.ndarray:
    """``n`` identical embeddings (mean pairwise cosine 1)."""
    return np.ones((n, 4), dtype=np.float32)


def apart(n: int) -> np.ndarray:
    """``n`` orthogonal embeddings (mean pairwise cosine 0)."""
    return np.eye(n, 4 if n <= 4 else n, dtype=np.float32)


def test_steps_of_splits_on_separators() -> None:
    """Steps are cut at commas, semicolons, colons, sentence ends, "then" and arrows."""
    assert ["Open the panel", "click Save", "wait", "reload the page", "Check logs"] == steps_of(
        "Open the panel then click Save; wait -> reload the page. Check logs: done"
    )
    assert ["build", "test", "ship"] == steps_of("build \u2192 test\nship")


def test_steps_of_drops_pieces_without_content_words() -> None:
    """A piece made of stop words only is not a step."""
    assert [] == steps_of("a, the, of; and then")
    assert ["deploy"] == steps_of("then, deploy.")


def test_choose_leaves_a_short_single_record() -> None:
    """A topic of one short record is left as it is."""
    assert choose([record("short note")], alike(1), ActionParams()) is None


def test_choose_compresses_a_long_single_record() -> None:
    """A topic of one record of at least compress_min_words words is compressed."""
    long = " ".join(["word"] * 100)
    assert ConsolidationAction.COMPRESS == choose([record(long)], alike(1), ActionParams())
    params = ActionParams(compress_min_words=101)
    assert choose([record(long)], alike(1), params) is None


def test_choose_skill_when_all_sources_are_skills() -> None:
    """Sources that are all skills make a skill whatever their similarity."""
    sources = [record("x", type_=MemoryType.SKILL), record("y", type_=MemoryType.SKILL)]
    assert ConsolidationAction.SKILL == choose(sources, apart(2), ActionParams())


def test_choose_skill_for_similar_step_lists() -> None:
    """Alike records written as lists of steps make a skill."""
    sources = [record(PROCEDURE), record(PROCEDURE)]
    assert ConsolidationAction.SKILL == choose(sources, alike(2), ActionParams())
    assert ConsolidationAction.MERGE == choose(sources, apart(2), ActionParams())


def test_choose_promote_for_repeated_observation() -> None:
    """At least promote_min alike records become a belief."""
    sources = [record("The nightly backup completed.") for _ in range(3)]
    assert ConsolidationAction.PROMOTE == choose(sources, alike(3), ActionParams())


def test_choose_merge_below_promote_min_or_dissimilar() -> None:
    """Too few or too different records are merged instead of promoted."""
    two = [record("The nightly backup completed.") for _ in range(2)]
    three = [record("The nightly backup completed.") for _ in range(3)]
    assert ConsolidationAction.MERGE == choose(two, alike(2), ActionParams())
    assert ConsolidationAction.MERGE == choose(three, apart(3), ActionParams())
    assert ConsolidationAction.PROMOTE == choose(two, alike(2), ActionParams(promote_min=2))


def test_choose_similarity_threshold_is_inclusive() -> None:
    """Mean similarity exactly at promote_similarity promotes; just below it merges."""
    sources = [record("The nightly backup completed.") for _ in range(3)]
    vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)  # mean cosine 1/3
    assert ConsolidationAction.PROMOTE == choose(
        sources, vectors, ActionParams(promote_similarity=1 / 3 - 1e-6)
    )
    assert ConsolidationAction.MERGE == choose(
        sources, vectors, ActionParams(promote_similarity=1 / 3 + 1e-6)
    )


def test_choose_tolerates_a_zero_vector() -> None:
    """A zero embedding counts as dissimilar rather than producing NaN."""
    sources = [record("The nightly backup completed.") for _ in range(3)]
    vectors = np.array([[1, 0], [1, 0], [0, 0]], dtype=np.float32)
    assert ConsolidationAction.MERGE == choose(sources, vectors, ActionParams())


def test_merged_steps_keep_order_of_one_source() -> None:
    """The steps of one procedure come out in the order written."""
    assert [
        "Stop the service",
        "drain the queue",
        "run migration 42",
        "restart the service",
        "check /health",
    ] == merged_steps([record(PROCEDURE)])


def test_merged_steps_drop_a_repeat_within_a_source() -> None:
    """A step repeated inside one source is listed once."""
    text = "Stop the service, drain the queue, stop the service, run migration 7"
    assert ["Stop the service", "drain the queue", "run migration 7"] == merged_steps(
        [record(text)]
    )


def test_merged_steps_are_distinct_across_sources() -> None:
    """Steps repeated by a later source are listed once; a variant with a new fact is kept.

    Regression: select_clauses ran on each source's steps separately, so two identical
    procedures listed every step twice.
    """
    second = PROCEDURE.replace("migration 42", "migration 43")
    assert [
        "Stop the service",
        "drain the queue",
        "run migration 42",
        "restart the service",
        "check /health",
        "run migration 43",
    ] == merged_steps([record(PROCEDURE), record(second)])


def test_merged_steps_are_capped() -> None:
    """Each step is cut to 500 characters and there are at most 100 steps."""
    long_step = "x" * 600
    assert [long_step[:500]] == merged_steps([record(long_step)])
    many = ", ".join(f"step{n} alpha{n}" for n in range(150))
    assert 100 == len(merged_steps([record(many)]))


def _writers(sources: list[MemoryRecord]) -> list[str]:
    return [s.source_agent for s in sources]


def test_combined_confidence_of_one_source_is_its_confidence() -> None:
    """One source gives its own confidence."""
    sources = [record(confidence=0.5)]
    assert 0.5 == combined_confidence(sources, _writers(sources))


def test_combined_confidence_grows_with_independent_writers() -> None:
    """Sources written by different agents combine as a noisy OR."""
    two = [record(confidence=0.5), record(confidence=0.5, agent="b")]
    assert 0.75 == combined_confidence(two, _writers(two))
    three = [*two, record(confidence=0.5, agent="c")]
    assert 0.875 == combined_confidence(three, _writers(three))


def test_combined_confidence_counts_one_writer_once_whatever_its_event_times() -> None:
    """Repeats by one agent, on any days it claims, count once at their best confidence."""
    repeats = [
        record(confidence=0.5),
        record(confidence=0.6, when=DAY2),
        record(confidence=0.4, when=DAY1.replace(hour=20)),
    ]
    assert 0.6 == combined_confidence(repeats, _writers(repeats))


def test_combined_confidence_goes_by_the_audited_writer_not_the_claimed_agent() -> None:
    """Two records claiming different source agents but written by one agent count once."""
    claimed = [record(confidence=0.5, agent="a"), record(confidence=0.5, agent="b")]
    assert 0.5 == combined_confidence(claimed, ["writer", "writer"])


def test_combined_confidence_is_capped() -> None:
    """The combined confidence never exceeds 0.99."""
    sources = [record(confidence=0.9, agent=name) for name in "abcde"]
    assert 0.99 == combined_confidence(sources, _writers(sources))
    sure = [record(confidence=1.0)]
    assert 0.99 == combined_confidence(sure, _writers(sure))


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (ConsolidationAction.SKILL, MemoryType.SKILL),
        (ConsolidationAction.PROMOTE, MemoryType.BELIEF),
        (ConsolidationAction.COMPRESS, MemoryType.DECISION),
    ],
)
def test_output_type_by_action(action: ConsolidationAction, expected: MemoryType) -> None:
    """Skills and beliefs have fixed types; a compressed record keeps its own type."""
    sources = [record(type_=MemoryType.DECISION), record(type_=MemoryType.EPISODE)]
    assert expected == output_type(action, sources)


def test_output_type_of_merge_prefers_episode_then_majority() -> None:
    """A merge is an episode if any source is; else the most common type (ties by name)."""
    merge = ConsolidationAction.MERGE
    types = [MemoryType.DECISION, MemoryType.DECISION, MemoryType.EPISODE]
    assert MemoryType.EPISODE == output_type(merge, [record(type_=t) for t in types])
    types = [MemoryType.BELIEF, MemoryType.DECISION, MemoryType.BELIEF]
    assert MemoryType.BELIEF == output_type(merge, [record(type_=t) for t in types])
    types = [MemoryType.BELIEF, MemoryType.DECISION]
    assert MemoryType.DECISION == output_type(merge, [record(type_=t) for t in types])


def test_level_of_is_the_most_closed() -> None:
    """The consolidated record is as closed as the most closed source."""
    levels = [AccessLevel.PUBLIC, AccessLevel.SENSITIVE, AccessLevel.USER]
    assert AccessLevel.SENSITIVE == level_of([record(level=level) for level in levels])
    assert AccessLevel.PUBLIC == level_of([record(level=AccessLevel.PUBLIC)])


def pairwise(n: int, cosine: float) -> np.ndarray:
    """``n`` unit embeddings whose every pair has this cosine."""
    vectors = np.zeros((n, n + 1), dtype=np.float32)
    vectors[:, 0] = np.sqrt(cosine)
    vectors[np.arange(n), np.arange(1, n + 1)] = np.sqrt(1 - cosine)
    return vectors


def test_an_incident_told_in_steps_is_a_merge_and_a_repeated_routine_a_skill() -> None:
    """Arrows and commas alone do not make a procedure: a log of one incident is written in
    steps too, but each step is new; a routine repeats its steps."""
    log = [
        record("Pump alarm on bed 4 → occlusion cleared, line flushed, rate reset, pharmacy paged"),
        record(
            "Bed 4 pump alarmed later → swapped to spare unit BM-12, old one tagged, biomed told"
        ),
        record("Biomed found a cracked pressure sensor, unit BM-07 sent to vendor, loan unit due"),
    ]
    routine = [
        record("Strip linen, bag by colour, wipe frame with chlorclean, remake bed, mark clean"),
        record("Stripped linen, bagged by colour, wiped frame with chlorclean, remade bed, marked"),
        record("Linen stripped, bag by colour, chlorclean wipe of frame, remake bed, mark clean"),
    ]
    assert repeated_steps(log) < ActionParams().skill_repeated
    assert repeated_steps(routine) >= 0.5
    alike_enough = pairwise(3, 0.6)  # above skill_similarity, below promote_similarity
    assert ConsolidationAction.MERGE == choose(log, alike_enough, ActionParams())
    assert ConsolidationAction.SKILL == choose(routine, alike_enough, ActionParams())


def test_observations_that_say_it_happened_again_are_promoted_though_less_alike() -> None:
    """Below promote_similarity, a pattern told as one ("again", "third week in a row") or
    with a belief among its records is promoted; a story of the same likeness is merged."""
    story = [
        record("Handover started late, the night nurse was still with bed 9."),
        record("Day team took over at 07:40 after the family meeting ran long."),
        record("Handover notes moved to the printed SBAR sheet for the review."),
    ]
    pattern = [
        record("Handover overran again, finished 07:48."),
        record("Handover late once more; finished 07:50."),
        record("Third week in a row the handover ran past 07:45."),
    ]
    believed = [*story[:2], record("Handovers overrun on Tuesdays.", type_=MemoryType.BELIEF)]
    vectors = pairwise(3, 0.55)
    assert ConsolidationAction.MERGE == choose(story, vectors, ActionParams())
    assert ConsolidationAction.PROMOTE == choose(pattern, vectors, ActionParams())
    assert ConsolidationAction.PROMOTE == choose(believed, vectors, ActionParams())
    assert ConsolidationAction.MERGE == choose(pattern, pairwise(3, 0.45), ActionParams())


def test_steps_of_keeps_an_abbreviation_with_its_number() -> None:
    """A sentence end parts steps only before a capital: "ext. 4410" stays whole (it was
    cut in two, and the fact was lost from the skill's text)."""
    assert ["phoned the bed manager on ext. 4410"] == steps_of(
        "phoned the bed manager on ext. 4410"
    )
    assert ["Weighed approx. 3 kg", "Logged it"] == steps_of("Weighed approx. 3 kg. Logged it.")


def test_repeated_steps_stays_fast_on_a_crafted_topic() -> None:
    """Fifty alike records of a hundred steps that each share one word: every step was
    compared with every other (16 s); a sample of each source's first steps is compared."""
    sources = [
        record(", ".join(f"shared alpha{s}x{i} beta{s}x{i} gamma{s}x{i}" for i in range(100)))
        for s in range(50)
    ]
    started = time.perf_counter()
    assert 0.0 == repeated_steps(sources)
    assert time.perf_counter() - started < 2.0
