"""The simulated agent's life: a pure, seeded stream of writes and questions (ADR-020)."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from functools import cache

import pytest

from engram.memory.schemas import validate_record
from engram.memory.types import MemoryRecord, MemoryType
from engram.protocols.simulator.phrases import CHATTER, HELD_OUT_CHATTER
from engram.protocols.simulator.world import (
    BASE_TIME,
    HELD_OUT_TEMPLATES,
    KIND_SHARES,
    Question,
    World,
    Write,
    agent_life,
    kind_counts,
    seeds,
    templates_used,
)

CASES = [(seed, "train") for seed in seeds("train", 4)] + [
    (seed, "eval") for seed in seeds("eval", 3)
]
IDS = [f"{split}-{seed}" for seed, split in CASES]


@cache
def life(seed: int, split: str) -> World:
    """One world per case, generated once for the whole module."""
    return agent_life(seed, split=split)


def writes_of(world: World) -> list[Write]:
    """The world's writes, in order."""
    return [step for step in world.steps if isinstance(step, Write)]


def questions_of(world: World) -> list[Question]:
    """The world's questions, in order."""
    return [step for step in world.steps if isinstance(step, Question)]


def all_values(world: World) -> dict[str, set[str]]:
    """Every value each fact ever had, lower-cased, by fact id."""
    values: dict[str, set[str]] = defaultdict(set)
    for write in writes_of(world):
        if write.fact_id is not None and write.value is not None:
            values[write.fact_id].add(write.value.lower())
    return values


def test_same_seed_gives_the_same_world() -> None:
    """Generation is pure: the same arguments give an identical world."""
    assert agent_life(1000) == agent_life(1000)
    assert agent_life(9000, split="eval", writes=60, questions=20) == agent_life(
        9000, split="eval", writes=60, questions=20
    )


def test_different_seeds_give_different_worlds() -> None:
    """Two seeds give two different lives."""
    assert agent_life(1000).steps != agent_life(1001).steps
    assert agent_life(9000, split="eval").steps != agent_life(9001, split="eval").steps


def test_seeds_come_from_disjoint_ranges() -> None:
    """Train seeds start at 1000, eval seeds at 9000, and the two never meet."""
    train, evaluation = seeds("train", 50), seeds("eval", 50)
    assert train == list(range(1000, 1050))
    assert evaluation == list(range(9000, 9050))
    assert all(seed < 9000 for seed in seeds("train", 8000))
    assert not set(seeds("train", 8000)) & set(seeds("eval", 500))
    with pytest.raises(ValueError, match="train seeds"):
        seeds("train", 8001)
    with pytest.raises(ValueError, match="split"):
        seeds("test", 1)


def test_seeds_from_far_on_are_made_alone() -> None:
    """Seeds from the ``first``-th on are the same as those of a longer list, and only they
    are made (hostile pass AB: the evaluation built every seed before the first it played)."""
    assert seeds("eval", 3, 5) == seeds("eval", 8)[5:]
    assert seeds("train", 2, 7998) == [8998, 8999]
    assert [10**12 + 9000] == seeds("eval", 1, 10**12)
    with pytest.raises(ValueError, match="train seeds"):
        seeds("train", 2, 7999)
    with pytest.raises(ValueError, match="negative"):
        seeds("eval", 1, -1)


def test_unknown_split_is_refused() -> None:
    """Only the train and eval splits exist."""
    with pytest.raises(ValueError, match="split"):
        agent_life(1000, split="dev")


@pytest.mark.parametrize(("writes", "questions"), [(240, 80), (60, 20), (17, 5), (400, 10)])
def test_the_world_has_the_asked_number_of_writes_and_questions(
    writes: int, questions: int
) -> None:
    """A world holds exactly ``writes`` writes and ``questions`` questions."""
    world = agent_life(1003, writes=writes, questions=questions)
    assert writes == len(writes_of(world))
    assert questions == len(questions_of(world))
    assert sum(kind_counts(writes).values()) == writes


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_kinds_of_writes_come_in_the_planned_shares(seed: int, split: str) -> None:
    """Each kind's share of the writes is within ten points of its plan."""
    writes = writes_of(life(seed, split))
    kinds = Counter(write.kind for write in writes)
    assert set(KIND_SHARES) == set(kinds)
    for kind, share in KIND_SHARES.items():
        assert abs(kinds[kind] / len(writes) - share) <= 0.10, kind


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_later_writes_refer_to_facts_stated_earlier(seed: int, split: str) -> None:
    """Restatements, near duplicates and updates are about facts already stated; facts are new."""
    stated: set[str] = set()
    for write in writes_of(life(seed, split)):
        if write.kind == "chatter":
            assert write.fact_id is None
            assert write.value is None
            continue
        assert write.fact_id is not None
        assert write.value is not None
        if write.kind == "fact":
            assert write.fact_id not in stated
            stated.add(write.fact_id)
        else:
            assert write.fact_id in stated, write


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_restatements_are_worded_anew_and_state_the_current_value(seed: int, split: str) -> None:
    """A restatement says the current value in words no earlier write of the fact used."""
    earlier: dict[str, list[str]] = defaultdict(list)
    current: dict[str, str] = {}
    for write in writes_of(life(seed, split)):
        if write.fact_id is None or write.value is None:
            continue
        if write.kind in {"fact", "update"}:
            current[write.fact_id] = write.value
        else:
            assert current[write.fact_id] == write.value
        if write.kind == "restatement":
            assert all(_words(write.content) != _words(old) for old in earlier[write.fact_id])
        if write.kind == "near_duplicate":
            assert write.content not in earlier[write.fact_id]
        assert write.value.lower() in write.content.lower()
        earlier[write.fact_id].append(write.content)


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_updates_change_the_value_and_mention_both(seed: int, split: str) -> None:
    """An update gives a fact a new value and is written as a change from the old one."""
    current: dict[str, str] = {}
    updates = 0
    for write in writes_of(life(seed, split)):
        if write.kind == "fact" and write.fact_id and write.value:
            current[write.fact_id] = write.value
        if write.kind == "update" and write.fact_id and write.value:
            old = current[write.fact_id]
            assert old.lower() != write.value.lower()
            assert old.lower() in write.content.lower()
            current[write.fact_id] = write.value
            updates += 1
    assert updates > 0


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_questions_have_a_stated_answer_and_the_right_stale_values(seed: int, split: str) -> None:
    """A question's answer is in an earlier write stating the fact's current value, is no
    other fact's value, and its stale values are the fact's earlier values, in order."""
    world = life(seed, split)
    values = all_values(world)
    history: dict[str, list[str]] = defaultdict(list)
    stating: dict[str, list[str]] = defaultdict(list)  # contents stating the current value
    for step in world.steps:
        if isinstance(step, Write):
            if step.fact_id is None or step.value is None:
                continue
            if step.kind in {"fact", "update"}:
                history[step.fact_id].append(step.value.lower())
                stating[step.fact_id] = []
            stating[step.fact_id].append(step.content.lower())
            continue
        assert step.fact_id in history, "asked before it was stated"
        *stale, answer = history[step.fact_id]
        assert answer == step.answer
        assert tuple(stale) == step.stale
        assert any(step.answer in content for content in stating[step.fact_id])
        others = {v for fact_id, vs in values.items() if fact_id != step.fact_id for v in vs}
        assert step.answer not in others
        assert step.answer not in step.query.lower()


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_answers_appear_in_no_write_about_another_fact(seed: int, split: str) -> None:
    """Finding the answer in a memory's content means the memory is about that fact."""
    world = life(seed, split)
    for question in questions_of(world):
        for write in writes_of(world):
            if write.fact_id != question.fact_id:
                assert question.answer not in write.content.lower(), (question, write)


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_questions_come_late_and_often_about_updated_facts(seed: int, split: str) -> None:
    """Questions are interleaved, mostly in the second half, a quarter or more about updates."""
    world = life(seed, split)
    questions = questions_of(world)
    about_updates = sum(1 for question in questions if question.stale)
    assert about_updates >= math.ceil(len(questions) / 4)
    seen = 0
    late = 0
    total = len(writes_of(world))
    for step in world.steps:
        if isinstance(step, Write):
            seen += 1
        else:
            late += seen > total // 2
    assert late >= 0.6 * len(questions)
    assert late < len(questions), "some questions come in the first half"
    assert not isinstance(world.steps[-1], Question) or late > 0
    last_write = max(i for i, step in enumerate(world.steps) if isinstance(step, Write))
    first_question = min(i for i, step in enumerate(world.steps) if isinstance(step, Question))
    assert first_question < last_write


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_values_are_distinct_and_never_inside_one_another(seed: int, split: str) -> None:
    """No value of a world contains another, so a substring test names one fact."""
    flat = [value for values in all_values(life(seed, split)).values() for value in values]
    assert len(flat) == len(set(flat))
    for value in flat:
        for other in flat:
            assert value == other or value not in other, (value, other)


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_every_write_passes_the_kernel_schema(seed: int, split: str) -> None:
    """Each write is a valid proposal for its memory type."""
    for write in writes_of(life(seed, split)):
        record = MemoryRecord.draft(
            write.memory_type,
            write.content,
            source_agent="sim",
            metadata=write.metadata,
            event_time=write.event_time,
        )
        assert [] == validate_record(record), write


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_metadata_is_consistent_for_a_fact(seed: int, split: str) -> None:
    """Every write about a fact has the same type and the same name, kind and subject."""
    first: dict[str, Write] = {}
    for write in writes_of(life(seed, split)):
        if write.fact_id is None:
            continue
        seen = first.setdefault(write.fact_id, write)
        assert seen.memory_type == write.memory_type
        for key in ("name", "kind", "subject"):
            assert seen.metadata.get(key) == write.metadata.get(key)
        if write.memory_type is MemoryType.RESOURCE:
            assert write.metadata["locator"] == write.value


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_all_fact_types_are_used_and_beliefs_most(seed: int, split: str) -> None:
    """Facts are beliefs most of all, and every other type the simulator writes appears."""
    types = Counter(w.memory_type for w in writes_of(life(seed, split)) if w.kind == "fact")
    expected = {
        MemoryType.BELIEF,
        MemoryType.PREFERENCE,
        MemoryType.DECISION,
        MemoryType.RESOURCE,
        MemoryType.ENTITY,
        MemoryType.EPISODE,
    }
    assert expected == set(types)
    assert types.most_common(1)[0][0] is MemoryType.BELIEF


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_episodes_have_increasing_utc_times_and_others_none(seed: int, split: str) -> None:
    """Chatter is an episode; episodes carry a UTC time that moves forward; others have none."""
    last = BASE_TIME
    for write in writes_of(life(seed, split)):
        if write.kind == "chatter":
            assert write.memory_type is MemoryType.EPISODE
            assert {} == write.metadata
        if write.memory_type is not MemoryType.EPISODE:
            assert write.event_time is None
            continue
        assert write.event_time is not None
        assert write.event_time.utcoffset() is not None
        assert write.event_time > last
        last = write.event_time


@pytest.mark.parametrize(("seed", "split"), CASES, ids=IDS)
def test_texts_are_six_to_thirty_words(seed: int, split: str) -> None:
    """Write contents stay between 6 and 30 words; queries are short."""
    world = life(seed, split)
    for write in writes_of(world):
        assert 6 <= len(write.content.split()) <= 30, write.content
    for question in questions_of(world):
        assert 2 <= len(question.query.split()) <= 30, question.query


@pytest.mark.parametrize("seed", seeds("train", 6))
def test_train_worlds_never_use_held_out_templates(seed: int) -> None:
    """Train worlds are worded only with templates that eval does not hold out."""
    assert not templates_used(seed) & HELD_OUT_TEMPLATES
    held_chatter = set(CHATTER[len(CHATTER) - HELD_OUT_CHATTER :])
    for write in writes_of(agent_life(seed)):
        if write.kind == "chatter":
            assert not any(_same_line(write.content, line) for line in held_chatter)


def _same_line(content: str, template: str) -> bool:
    pattern = re.escape(template).replace(re.escape("{s}"), ".+")
    return re.fullmatch(pattern, content) is not None


def test_eval_worlds_use_held_out_templates() -> None:
    """Eval worlds bring wording no train world saw: statements, queries, updates, chatter."""
    used = set().union(*(templates_used(seed, split="eval") for seed in seeds("eval", 3)))
    held = used & HELD_OUT_TEMPLATES
    for part in (":s", ":q", ":u", "chatter:"):
        assert any(part in tid for tid in held), part
    assert any(
        _same_line(write.content, line)
        for write in writes_of(agent_life(9000, split="eval"))
        for line in CHATTER[len(CHATTER) - HELD_OUT_CHATTER :]
    )


def test_held_out_templates_are_the_last_of_each_slot() -> None:
    """Each slot holds out its last two statements, last query and last update."""
    assert "host:s4" in HELD_OUT_TEMPLATES
    assert "host:s5" in HELD_OUT_TEMPLATES
    assert "host:s3" not in HELD_OUT_TEMPLATES
    assert "host:q2" in HELD_OUT_TEMPLATES
    assert "host:q1" not in HELD_OUT_TEMPLATES
    assert "host:u2" in HELD_OUT_TEMPLATES
    assert f"chatter:{len(CHATTER) - 1}" in HELD_OUT_TEMPLATES
    assert "chatter:0" not in HELD_OUT_TEMPLATES
