"""A seeded agent life: the memory writes an agent makes and the questions it later asks.

:func:`agent_life` is pure: the same seed, split and sizes give the same :class:`World`, and
nothing outside the function's own ``random.Random`` is read. A world states facts
(subject, slot, value), restates them in other words, repeats them with trivial edits,
chats, changes some of them (updates), and asks about them; each question knows its answer
(the value current when it is asked) and the values that went stale before it.

Shares of the writes: facts 40 %, restatements 20 %, near duplicates 8 %, updates 15 %,
chatter 17 %. A fact is stated once as a ``fact`` write, so a world of ``writes`` writes has
about ``0.4 * writes`` facts. Worlds of split ``train`` never use the held-out templates of
:mod:`engram.protocols.simulator.phrases` (:data:`HELD_OUT_TEMPLATES`); ``eval`` worlds use
every template.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from engram.memory.types import MemoryType
from engram.protocols.simulator import phrases
from engram.protocols.simulator.phrases import CHATTER, SUBJECTS, VALUE_MAKERS, Slot
from engram.protocols.simulator.slots import SLOTS

BASE_TIME = datetime(2026, 3, 2, 9, tzinfo=UTC)
SPLITS = ("train", "eval")
KIND_SHARES: dict[str, float] = {
    "fact": 0.40,
    "restatement": 0.20,
    "near_duplicate": 0.08,
    "update": 0.15,
    "chatter": 0.17,
}
TRAIN_SEEDS = range(1000, 9000)
EVAL_SEED_START = 9000
MAX_UPDATES_PER_FACT = 2
MIN_UPDATE_GAP = 8  # writes between a fact's statement (or last change) and its update
_LATE_QUESTIONS = 0.8  # share of questions asked in the second half of the stream
_PREFER_UPDATED = 0.35  # chance a question goes to an updated fact beyond the quota


@dataclass(frozen=True, slots=True)
class Write:
    """One memory write the agent makes."""

    kind: str  # "fact" | "restatement" | "near_duplicate" | "chatter" | "update"
    fact_id: str | None  # which fact it is about (None for chatter)
    memory_type: MemoryType
    content: str
    metadata: dict[str, object]  # satisfies the type's schema
    event_time: datetime | None  # tz-aware UTC for episodes, else None
    value: str | None  # the fact's value this write states (None for chatter)


@dataclass(frozen=True, slots=True)
class Question:
    """A later question whose answer is known.

    ``answer`` and ``stale`` are lower-cased, so ``answer in content.lower()`` tells whether a
    memory's content states the answer.
    """

    fact_id: str
    query: str  # a search query, worded unlike the statements
    answer: str  # the value current when the question is asked
    stale: tuple[str, ...]  # earlier values of the fact, no longer true


Step: TypeAlias = Write | Question
_Maker: TypeAlias = Callable[[], Write | None]


@dataclass(frozen=True, slots=True)
class World:
    """One agent life: its seed, split and steps in time order."""

    seed: int
    split: str  # "train" | "eval"
    steps: tuple[Step, ...]


def _held_out() -> frozenset[str]:
    ids: set[str] = set()
    for slot in SLOTS:
        groups = (
            ("s", slot.statements, phrases.HELD_OUT_STATEMENTS),
            ("q", slot.queries, phrases.HELD_OUT_QUERIES),
            ("u", slot.updates, phrases.HELD_OUT_UPDATES),
        )
        for prefix, templates, held in groups:
            ids.update(
                f"{slot.name}:{prefix}{i}" for i in range(len(templates) - held, len(templates))
            )
    held = phrases.HELD_OUT_CHATTER
    ids.update(f"chatter:{i}" for i in range(len(CHATTER) - held, len(CHATTER)))
    return frozenset(ids)


HELD_OUT_TEMPLATES: frozenset[str] = _held_out()
"""Ids of the templates only ``eval`` worlds use: ``slot:s3`` (statement), ``slot:q2``
(query), ``slot:u2`` (update), ``chatter:17``."""


def seeds(split: str, count: int, first: int = 0) -> list[int]:
    """``count`` seeds of a split from its ``first``-th on: train from 1000 (below 9000),
    eval from 9000. Only the seeds asked for are made, however far on they start."""
    _check_split(split)
    if count < 0 or first < 0:
        raise ValueError("count and first must not be negative")
    if split == "train":
        if first + count > len(TRAIN_SEEDS):
            raise ValueError(f"at most {len(TRAIN_SEEDS)} train seeds")
        return list(TRAIN_SEEDS[first : first + count])
    start = EVAL_SEED_START + first
    return list(range(start, start + count))


def agent_life(seed: int, *, split: str = "train", writes: int = 240, questions: int = 80) -> World:
    """The seeded life of one agent: ``writes`` writes with ``questions`` questions among them."""
    return _Life(seed, split).run(writes, questions)


def templates_used(
    seed: int, *, split: str = "train", writes: int = 240, questions: int = 80
) -> frozenset[str]:
    """Ids of the templates :func:`agent_life` used for this world (see HELD_OUT_TEMPLATES)."""
    life = _Life(seed, split)
    life.run(writes, questions)
    return frozenset(life.templates)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")


def kind_counts(writes: int, *, need_fact: bool = False) -> dict[str, int]:
    """How many writes of each kind a world of ``writes`` writes plans (they sum to it)."""
    counts = {
        kind: round(share * writes) for kind, share in KIND_SHARES.items() if kind != "chatter"
    }
    if need_fact and writes > 0:
        counts["fact"] = max(counts["fact"], 1)
    for kind in ("update", "near_duplicate", "restatement", "fact"):
        while sum(counts.values()) > writes and counts[kind] > 0:
            counts[kind] -= 1
    counts["chatter"] = writes - sum(counts.values())
    return counts


@dataclass(slots=True)
class _Fact:
    fact_id: str
    slot: Slot
    subject: str
    value: str
    metadata: dict[str, object]
    stated_at: int  # index of the write that last changed the value
    stale: list[str] = field(default_factory=list)
    said: set[tuple[str, str]] = field(default_factory=set)  # (template id, value) stated
    norms: set[str] = field(default_factory=set)  # normalised contents written so far
    texts: set[str] = field(default_factory=set)  # contents written so far
    current: list[Write] = field(default_factory=list)  # writes stating the current value


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _name(subject: str) -> str:
    return subject.removeprefix("the ")


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


def _render(template: str, subject: str, value: str = "", old: str = "") -> str:
    capital = subject[:1].upper() + subject[1:]
    return template.format(S=capital, s=subject, n=_name(subject), v=value, o=old)


class _Life:
    """The mutable state of one life while it is generated."""

    def __init__(self, seed: int, split: str) -> None:
        _check_split(split)
        self.seed = seed
        self.split = split
        self.rng = random.Random(seed)  # noqa: S311 - simulation, not cryptography
        self.values: list[str] = []  # every value of the world, lower-cased
        self.facts: list[_Fact] = []
        self.taken: set[tuple[str, str]] = set()  # (slot, subject)
        self.exhausted: set[str] = set()  # slots whose values ran out
        self.templates: set[str] = set()
        self.minutes = 0
        self.index = 0  # of the write being made
        self.facts_left = 0  # fact writes still planned, this one included
        self.asked: set[str] = set()
        self.asked_updated = 0

    # --- templates -------------------------------------------------------------------------

    def _allowed(self, count: int, held: int) -> range:
        return range(count if self.split == "eval" else max(1, count - held))

    def _pick(self, key: str, templates: tuple[str, ...], held: int) -> tuple[str, str]:
        index = self.rng.choice(self._allowed(len(templates), held))
        tid = f"{key}{index}"
        self.templates.add(tid)
        return tid, templates[index]

    # --- values ----------------------------------------------------------------------------

    def _new_value(self, slot: Slot, subject: str) -> str | None:
        """A value no other value of the world contains or is contained in; None if none."""
        for _ in range(40):
            value = VALUE_MAKERS[slot.value_kind](self.rng, _slug(_name(subject)))
            low = value.lower()
            if not any(low in used or used in low for used in self.values):
                self.values.append(low)
                return value
        self.exhausted.add(slot.name)
        return None

    # --- writes ----------------------------------------------------------------------------

    def _write(self, kind: str, fact: _Fact | None, mtype: MemoryType, content: str,
               metadata: dict[str, object]) -> Write:  # fmt: skip
        when = BASE_TIME + timedelta(minutes=self.minutes) if mtype is MemoryType.EPISODE else None
        if fact is None:
            return Write(kind, None, mtype, content, dict(metadata), when, None)
        write = Write(kind, fact.fact_id, mtype, content, dict(metadata), when, fact.value)
        fact.norms.add(_norm(content))
        fact.texts.add(content)
        fact.current.append(write)
        return write

    def _metadata(self, slot: Slot, subject: str, value: str) -> dict[str, object]:
        if slot.memory_type is MemoryType.ENTITY:
            return {"name": _name(subject), "kind": slot.subject_kind}
        if slot.memory_type is MemoryType.PREFERENCE:
            return {"subject": slot.topic}
        if slot.memory_type is MemoryType.DECISION:
            return {"rationale": self.rng.choice(slot.rationales)}
        if slot.memory_type is MemoryType.RESOURCE:
            return {"locator": value}
        return {}

    def fact(self) -> Write | None:
        """The first statement of a new fact, or None when no slot has room left."""
        open_slots = [
            slot
            for slot in SLOTS
            if slot.name not in self.exhausted
            and any((slot.name, s) not in self.taken for s in SUBJECTS[slot.subject_kind])
        ]
        if not open_slots:
            return None
        used = {fact.slot.memory_type for fact in self.facts}
        missing = [slot for slot in open_slots if slot.memory_type not in used]
        if missing and len({slot.memory_type for slot in missing}) >= self.facts_left:
            open_slots = missing  # every type gets a fact while facts remain to be made
        slot = self.rng.choice(open_slots)
        subject = self.rng.choice(
            [s for s in SUBJECTS[slot.subject_kind] if (slot.name, s) not in self.taken]
        )
        value = self._new_value(slot, subject)
        if value is None:
            return self.fact()
        self.taken.add((slot.name, subject))
        fact_id = f"{_slug(_name(subject))}/{_slug(slot.name)}"
        metadata = self._metadata(slot, subject, value)
        fact = _Fact(fact_id, slot, subject, value, metadata, self.index)
        self.facts.append(fact)
        tid, template = self._pick(f"{slot.name}:s", slot.statements, phrases.HELD_OUT_STATEMENTS)
        fact.said.add((tid, value))
        return self._write(
            "fact", fact, slot.memory_type, _render(template, subject, value), fact.metadata
        )

    def _fresh(self, fact: _Fact) -> list[tuple[str, str]]:
        slot = fact.slot
        found = []
        for index in self._allowed(len(slot.statements), phrases.HELD_OUT_STATEMENTS):
            tid = f"{slot.name}:s{index}"
            content = _render(slot.statements[index], fact.subject, fact.value)
            if (tid, fact.value) not in fact.said and _norm(content) not in fact.norms:
                found.append((tid, content))
        return found

    def restatement(self) -> Write | None:
        """The current value of a stated fact in another template's words."""
        order = self.rng.sample(self.facts, len(self.facts))
        found = next(((fact, fresh) for fact in order if (fresh := self._fresh(fact))), None)
        if found is None:
            return None
        fact, fresh = found
        tid, content = self.rng.choice(fresh)
        self.templates.add(tid)
        fact.said.add((tid, fact.value))
        metadata = dict(fact.metadata)
        if fact.slot.rationales and self.rng.random() < 0.5:
            metadata["rationale"] = self.rng.choice(fact.slot.rationales)
        return self._write("restatement", fact, fact.slot.memory_type, content, metadata)

    def near_duplicate(self) -> Write | None:
        """An earlier write of a fact's current value with trivial edits."""
        if not self.facts:
            return None
        for _ in range(10):
            fact = self.rng.choice(self.facts)
            source = self.rng.choice(fact.current)
            content = _trivial_edit(source.content, fact.value, self.rng)
            if content is not None and content not in fact.texts:
                return self._write(
                    "near_duplicate", fact, source.memory_type, content, dict(source.metadata)
                )
        return None

    def update(self) -> Write | None:
        """A new value for a stated fact, written as a change."""
        candidates = [
            fact
            for fact in self.facts
            if len(fact.stale) < MAX_UPDATES_PER_FACT
            and fact.slot.name not in self.exhausted
            and self.index - fact.stated_at >= MIN_UPDATE_GAP
        ]
        self.rng.shuffle(candidates)
        for fact in candidates[:5]:
            value = self._new_value(fact.slot, fact.subject)
            if value is None:
                continue
            old, fact.value, fact.stated_at = fact.value, value, self.index
            fact.stale.append(old)
            fact.current = []
            if fact.slot.memory_type is MemoryType.RESOURCE:
                fact.metadata = {**fact.metadata, "locator": value}
            slot = fact.slot
            tid, template = self._pick(f"{slot.name}:u", slot.updates, phrases.HELD_OUT_UPDATES)
            fact.said.add((tid, value))
            content = _render(template, fact.subject, value, old)
            return self._write("update", fact, slot.memory_type, content, fact.metadata)
        return None

    def chatter(self) -> Write:
        """Transient talk, stored as an episode."""
        _, template = self._pick("chatter:", CHATTER, phrases.HELD_OUT_CHATTER)
        content = _render(template, self.rng.choice(SUBJECTS["service"]))
        return self._write("chatter", None, MemoryType.EPISODE, content, {})

    # --- questions -------------------------------------------------------------------------

    def question(self, total: int, asked: int) -> Question:
        """A question about a stated fact; at least a quarter go to updated facts if any."""
        updated = [fact for fact in self.facts if fact.stale]
        owed = math.ceil(total / 4) - self.asked_updated
        forced = owed >= total - asked
        pool = (
            updated if updated and (forced or self.rng.random() < _PREFER_UPDATED) else self.facts
        )
        fresh = [fact for fact in pool if fact.fact_id not in self.asked] or pool
        fact = self.rng.choice(fresh)
        self.asked.add(fact.fact_id)
        self.asked_updated += bool(fact.stale)
        slot = fact.slot
        _, template = self._pick(f"{slot.name}:q", slot.queries, phrases.HELD_OUT_QUERIES)
        return Question(
            fact.fact_id,
            _render(template, fact.subject),
            fact.value.lower(),
            tuple(old.lower() for old in fact.stale),
        )

    def _question_times(self, writes: int, questions: int) -> list[int]:
        """How many questions follow each write: most in the second half of the stream."""
        after = [0] * writes
        half, early = writes // 2, writes // 8
        for _ in range(questions):
            if half > early and self.rng.random() >= _LATE_QUESTIONS:
                after[self.rng.randrange(early, half)] += 1
            else:
                after[self.rng.randrange(half, writes)] += 1
        return after

    # --- the life --------------------------------------------------------------------------

    def run(self, writes: int, questions: int) -> World:
        """Generate the whole stream."""
        if writes < 0 or questions < 0:
            raise ValueError("writes and questions must not be negative")
        if questions and not writes:
            raise ValueError("questions need at least one write to ask about")
        remaining = kind_counts(writes, need_fact=questions > 0)
        makers = {
            "fact": self.fact,
            "restatement": self.restatement,
            "near_duplicate": self.near_duplicate,
            "update": self.update,
        }
        after = self._question_times(writes, questions)
        steps: list[Step] = []
        pending = asked = 0
        for index in range(writes):
            self.index = index
            self.minutes += self.rng.randint(2, 9)
            steps.append(self._next_write(remaining, makers))
            pending += after[index]
            while pending and self.facts:
                steps.append(self.question(questions, asked))
                pending, asked = pending - 1, asked + 1
        if pending:
            raise ValueError("no fact was stated, so no question can be asked")
        return World(self.seed, self.split, tuple(steps))

    def _next_write(self, remaining: dict[str, int], makers: dict[str, _Maker]) -> Write:
        tried: set[str] = set()
        self.facts_left = remaining["fact"]
        while True:
            kinds = [k for k, n in remaining.items() if n > 0 and k not in tried]
            needs_fact = {"restatement", "near_duplicate", "update"}
            kinds = [k for k in kinds if self.facts or k not in needs_fact]
            if not kinds:
                remaining["chatter"] = max(remaining["chatter"] - 1, 0)
                return self.chatter()
            kind = self.rng.choices(kinds, [remaining[k] for k in kinds])[0]
            write = self.chatter() if kind == "chatter" else makers[kind]()
            if write is not None:
                remaining[kind] -= 1
                return write
            tried.add(kind)


_PLURALS = {
    "meeting": "meetings", "request": "requests", "release": "releases", "host": "hosts",
    "runbook": "runbooks", "dashboard": "dashboards", "review": "reviews", "change": "changes",
    "contract": "contracts", "instance": "instances", "graph": "graphs", "service": "services",
    "record": "records", "node": "nodes", "region": "regions", "sync": "syncs",
}  # fmt: skip
_EDITS = ("lower", "period", "comma", "our", "article", "plural")


def _edit_part(part: str, how: str, at_start: bool) -> str:
    if how == "lower":
        return part.lower()
    if how == "comma":
        return part.replace(", ", " ", 1)
    if how == "our":
        inside = re.sub(r"(?<= )the\b", "our", part, count=1)
        return inside if inside != part else re.sub(r"^The\b", "Our", part, count=1)
    if how == "article":
        edited = re.sub(r"\b[Tt]he ", "", part, count=1)
        if at_start and edited[:1].islower() and part[:1].isupper():
            edited = edited[:1].upper() + edited[1:]
        return edited
    for word, plural in _PLURALS.items():
        edited = re.sub(rf"\b{word}\b", plural, part, count=1)
        if edited != part:
            return edited
    return part


def _trivial_edit(content: str, value: str, rng: random.Random) -> str | None:
    """``content`` with one or two trivial edits outside ``value``; None if nothing changed."""
    start = content.lower().find(value.lower())
    if start < 0:
        return None
    pre, kept, post = (
        content[:start],
        content[start : start + len(value)],
        content[start + len(value) :],
    )
    edits = list(_EDITS)
    rng.shuffle(edits)
    done = 0
    for how in edits:
        new_pre, new_post = pre, post
        if how == "period":
            new_post = post[:-1] if post.endswith(".") else post + "."
        else:
            new_pre = _edit_part(pre, how, at_start=True)
            if new_pre == pre:
                new_post = _edit_part(post, how, at_start=not pre)
        if (new_pre, new_post) != (pre, post):
            pre, post, done = new_pre, new_post, done + 1
        if done == 2 or (done == 1 and rng.random() < 0.5):
            break
    edited = pre + kept + post
    return edited if done and edited != content else None
