"""Randomised differential runs on two stores (hostile pass M).

A seed draws a sequence of steps: the caller's operations (remember, update, forget, get,
history, list, search with random options, feedback, each through one of the three adapters
or all of them; retries under an idempotency key; probes of ids it may not read; threads of
episodes and deep consolidation passes) interleaved with hidden steps, which a higher-tier
agent takes in store B only: writes near the caller's content at a level the caller may not
read, exact repeats of its records there, records raised out of its sight, records released
from quarantine to a level still above it, forgets, updates, and citations of its records.
Both stores run the caller's steps alike; every answer the caller gets goes into its
store's transcript, one entry per caller step, for
:func:`tests.integration.twin_helpers.differences`. A sweep at the end reads everything.

As-of instants are named by step (the instant after step ``k`` in each store), so the two
stores are asked about the same moment of their own histories. What two stores order by
their random ids (hits of one score, records of one instant) is put in one order first
(:func:`untied`), or left out where a limit cuts through it (``random_steps``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from engram.agents.registry import Principal
from engram.memory.types import AccessLevel, TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.integration.consolidation_helpers import DAY, INCIDENT, LATE_ETL
from tests.integration.twin_helpers import Store

FAST = 100_000.0

#: Facts, each with a paraphrase, a contradiction and a detail added.
TOPICS = [
    (
        "The zyqbar failover drill runs every Thursday at noon.",
        "Zyqbar failover drills happen on Thursdays at twelve.",
        "The zyqbar failover drill runs every Friday at noon.",
        "The zyqbar failover drill runs every Thursday at noon from the Dublin office.",
    ),
    (
        "The incident bridge for the payments outage is room Orion on floor nine.",
        "Payments outage incidents are bridged in room Orion, floor nine.",
        "The incident bridge for the payments outage is room Vega on floor two.",
        "The incident bridge for the payments outage is room Orion on floor nine, badge needed.",
    ),
    (
        "The ledger service runs on PostgreSQL 16 in the Frankfurt region.",
        "Ledger is hosted on PostgreSQL 16 in Frankfurt.",
        "The ledger service runs on PostgreSQL 17 in the Frankfurt region.",
        "The ledger service runs on PostgreSQL 16 in the Frankfurt region with two replicas.",
    ),
    (
        "Mira Holt owns the quarterly capacity review for the storage team.",
        "The storage team's quarterly capacity review is owned by Mira Holt.",
        "Jonas Berg owns the quarterly capacity review for the storage team.",
        "Mira Holt owns the quarterly capacity review for the storage team and its budget.",
    ),
]
EPISODES = [
    "The zyqbar drill failed over in 42 seconds on the Thursday run.",
    "The payments outage bridge in room Orion lasted two hours.",
    "The ledger migration to PostgreSQL 16 finished without downtime.",
    "The zyqbar drill failed over in 57 seconds; the replica lagged again.",
    "The zyqbar drill was skipped because the replica lagged again.",
    *INCIDENT,
    *LATE_ETL,
]
EVENT_TIMES = [
    "2026-03-02T10:00:00+00:00",
    "2026-05-11T10:00:00+00:00",
    "2026-08-20T10:00:00+00:00",
    "2026-03-09T10:00:00+00:00",
    "2026-03-16T10:00:00+00:00",
    *[(DAY + timedelta(hours=n)).isoformat() for n in range(len(INCIDENT))],
    *[(DAY + timedelta(days=n + 3)).isoformat() for n in range(len(LATE_ETL))],
]
PII = "Call Dana Whitfield at dana.whitfield@example.com about the zyqbar drill in room Orion."
QUERIES = [
    "zyqbar drill",
    "incident bridge room Orion floor nine",
    "which database does the ledger use",
    "who owns the capacity review",
    "Vega",
    "Frankfurt",
    "Jonas Berg",
    "failover drill Friday",
    "checkout-api latency incident",
    "orders_daily ETL late",
    "Dana Whitfield",
]
TAGS = ["ops", "drill", "db"]
CALLER_OPS = {
    "remember": 6,
    "update": 3,
    "forget": 1,
    "get": 3,
    "history": 2,
    "list": 2,
    "search": 10,
    "feedback": 2,
    "probe": 3,
    "consolidate": 1,
    "retry": 2,
    "series": 1,
}
PROBES = ["get", "history", "feedback", "update", "forget", "cite", "version"]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")
HIDDEN_OPS = {
    "release": 1,
    "series": 1,
    "near": 4,
    "dup": 3,
    "raise": 2,
    "forget": 1,
    "cite": 2,
    "update": 2,
}
VIAS = ["session", "rest", "mcp"]
#: Hidden writers and the levels they write, for each caller.
HIDERS = {
    "writer": [("boss", "sensitive"), ("boss", "system")],
    "intern": [("boss", "sensitive"), ("other", "user")],
    "narrow": [("boss", "sensitive"), ("other", "user")],
}
#: Levels below sensitive that a quarantined record is released to, hidden from each caller.
RELEASED = {"writer": ["system"], "intern": ["user", "system"], "narrow": ["user", "system"]}


def steps(seed: int, count: int, hidden_share: float = 0.35) -> list[dict[str, Any]]:
    """``count`` steps drawn from ``seed`` (a hidden step carries ``hidden: True``)."""
    rng = random.Random(seed)  # noqa: S311 (a test's reproducible draw)
    drawn: list[dict[str, Any]] = []
    remembered = 0
    keyed: list[dict[str, Any]] = []
    for index in range(count):
        if index > 0 and rng.random() < hidden_share:
            kind = rng.choices(list(HIDDEN_OPS), list(HIDDEN_OPS.values()))[0]
            drawn.append(_hidden_step(rng, kind, remembered, index))
            continue
        kind = rng.choices(list(CALLER_OPS), list(CALLER_OPS.values()))[0]
        if kind not in ("remember", "list", "search", "probe") and remembered == 0:
            kind = "remember"
        if kind == "retry":  # a write sent again under its key, maybe through another adapter
            step = {**rng.choice(keyed), "via": rng.choice(VIAS)} if keyed else {"kind": "list"}
            step.setdefault("args", {})
        elif kind == "series":  # a thread of episodes, for consolidation to merge or promote
            step = {"kind": kind, "via": rng.choice(VIAS), "series": rng.randrange(2)}
        else:
            step = _caller_step(rng, kind, remembered, index)
            if kind in ("remember", "update", "forget") and rng.random() < 0.35:
                step["key"] = f"k-{index}"
                keyed.append(step)
        remembered += _SERIES[step["series"]] if kind == "series" else step["kind"] == "remember"
        drawn.append(step)
    drawn.append({"kind": "sweep", "slots": remembered})
    return drawn


#: The episodes of each thread: (first index in EPISODES, how many).
_SERIES = [len(INCIDENT), len(LATE_ETL)]


def series(which: int) -> list[dict[str, Any]]:
    """The bodies of thread ``which`` (0: an incident, 1: a late job), oldest first."""
    start = EPISODES.index(INCIDENT[0]) if which == 0 else EPISODES.index(LATE_ETL[0])
    return [
        {"type": "episode", "content": EPISODES[n], "event_time": EVENT_TIMES[n]}
        for n in range(start, start + _SERIES[which])
    ]


def _body(rng: random.Random, *, level: str | None = None) -> dict[str, Any]:
    if rng.random() < 0.35:
        n = rng.randrange(len(EPISODES))
        body: dict[str, Any] = {
            "type": "episode",
            "content": EPISODES[n],
            "event_time": EVENT_TIMES[n],
        }
    else:
        body = {"type": "belief", "content": rng.choice(rng.choice(TOPICS))}
        if rng.random() < 0.05:
            body["content"] = PII
    if level is not None:
        body["access_level"] = level
    if rng.random() < 0.4:
        body["metadata"] = {"tags": rng.sample(TAGS, rng.randint(1, 2))}
    if rng.random() < 0.2:
        body["namespace"] = "ops"
    return body


def _caller_step(rng: random.Random, kind: str, remembered: int, index: int) -> dict[str, Any]:
    step: dict[str, Any] = {"kind": kind, "via": rng.choice(VIAS)}
    slot = rng.randrange(remembered) if remembered else 0
    as_of = rng.randrange(index) if index and rng.random() < 0.3 else None
    if kind == "remember":
        step["body"] = _body(rng, level=rng.choice([None, "agent", "public", "user"]))
        if remembered and rng.random() < 0.2:
            step["cite"] = rng.randrange(remembered)
    elif kind == "update":
        step.update(slot=slot, body=_body(rng))
        step["body"].pop("type")
        if rng.random() < 0.25:  # a new level (the restricted caller may not write "user")
            step["body"]["access_level"] = rng.choice(["public", "agent", "user"])
    elif kind in ("forget", "history"):
        step["slot"] = slot
    elif kind == "get":
        step.update(slot=slot, as_of=as_of)
        if rng.random() < 0.2:
            step["as_of_event"] = rng.choice(EVENT_TIMES)
    elif kind == "probe":
        step.update(what=rng.choice(PROBES), pick=rng.randrange(1000), body=_body(rng), n=index)
    elif kind == "feedback":
        step.update(slot=slot, useful=rng.random() < 0.6)
    elif kind == "list":
        step["args"] = {
            "limit": rng.choice([2, 3, 20]),
            **({"tags": [rng.choice(TAGS)]} if rng.random() < 0.3 else {}),
            **({"namespace": "ops"} if rng.random() < 0.2 else {}),
            **({"types": [rng.choice(["belief", "episode"])]} if rng.random() < 0.2 else {}),
        }
        step["as_of"] = as_of
        if rng.random() < 0.2:
            step["as_of_event"] = rng.choice(EVENT_TIMES)
    else:
        step.update(query=rng.choice(QUERIES + [t[0] for t in TOPICS]), as_of=as_of)
        options = (
            ("limit", 0.4, rng.choice([1, 2, 3, 5])),
            ("min_score", 0.5, rng.choice([0.0, 0.2, 0.38, 0.5, 0.7])),
            ("include_superseded", 0.3, True),
            ("include_consolidated", 0.1, True),
            ("types", 0.1, [rng.choice(["belief", "episode"])]),
            ("tags", 0.1, [rng.choice(TAGS)]),
            ("namespace", 0.1, "ops"),
            ("as_of_event", 0.1, rng.choice(EVENT_TIMES)),
        )
        step["args"] = {name: value for name, chance, value in options if rng.random() < chance}
    return step


def _hidden_step(rng: random.Random, kind: str, remembered: int, index: int) -> dict[str, Any]:
    step: dict[str, Any] = {"kind": kind, "hidden": True, "hider": rng.randrange(2)}
    step["body"] = _body(rng)
    if rng.random() < 0.4:
        step["body"]["content"] = step["body"]["content"].rstrip(".") + ". Confirmed."
    step["slot"] = rng.randrange(remembered) if remembered else None
    step["pick"] = rng.randrange(1000)
    step["series"] = rng.randrange(2)
    del index
    return step


@dataclass
class Twin:
    """One store running a sequence for ``caller``."""

    store: Store
    caller: str
    hidden: bool
    slots: list[UUID | None] = field(default_factory=list)
    marks: list[datetime] = field(default_factory=list)
    hidden_ids: list[UUID] = field(default_factory=list)
    #: Ids of versions the caller may not read (of hidden records, or hidden since).
    hidden_versions: list[UUID] = field(default_factory=list)
    transcript: list[Any] = field(default_factory=list)
    #: Which target each probe named in store B (numbered by first use), shared by the twins:
    #: store A names a fresh id for each number, so a hidden id probed twice is one id in A too.
    probes: dict[int, int] = field(default_factory=dict)
    standins: dict[int, UUID] = field(default_factory=dict)

    @property
    def principal(self) -> Principal:
        """The caller's principal."""
        return self.store.principals[self.caller]

    def session(self, name: str | None = None) -> AgentSession:
        """A session of ``name`` (the caller by default)."""
        return AgentSession(self.store.kernel, self.store.principals[name or self.caller].caller)

    def slot(self, index: int | None) -> UUID | None:
        """The caller's ``index``-th remembered record (None if it was refused)."""
        return None if index is None or index >= len(self.slots) else self.slots[index]


async def prepare(store: Store) -> None:
    """Register the agents every run uses."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("intern", TrustLevel.RESTRICTED, writes_per_minute=FAST)
    await store.agent("other", TrustLevel.STANDARD, writes_per_minute=FAST)
    # a standard agent narrowed to read agent-level records: it writes what it may not read
    await store.agent(
        "narrow", TrustLevel.STANDARD, writes_per_minute=FAST, max_read_level=AccessLevel.AGENT
    )


def untied(transcript: list[Any]) -> list[Any]:
    """A raw transcript (before :func:`normalised`) with what two stores order by random
    ids put in one order: each run of search hits of equal score, conflicts of equal
    similarity (and the update candidate, the first of them, named only as tied). Such runs
    are sorted by their text with ids and instants masked, so that ids first seen inside a
    run are numbered alike in both stores, then by when the ids they name were first seen in
    earlier steps (two records alike but for their ids); the legs' ranks stay with the
    positions."""
    seen: dict[str, int] = {}
    out = []
    for step in json.loads(json.dumps(transcript, default=str)):
        out.append(_untie(step, seen))
        for found in _UUID.findall(json.dumps(out[-1], sort_keys=True)):
            seen.setdefault(found, len(seen))
    return out


def _untie(value: Any, seen: dict[str, int]) -> Any:
    if isinstance(value, dict):
        out = {key: _untie(item, seen) for key, item in value.items()}
        if isinstance(out.get("hits"), list):
            out["hits"] = _untied_hits(out["hits"], seen)
        if isinstance(out.get("conflicts"), list):
            _untie_conflicts(out, seen)
        return out
    if isinstance(value, list):
        return [_untie(item, seen) for item in value]
    if isinstance(value, str):  # a summary names its sources' instants to the minute
        return _MINUTE.sub("<instant>", value)
    return value


def linked_in_order(transcript: list[Any]) -> list[Any]:
    """A normalised transcript with every ``evidence_links`` sorted: a summary cites sources
    of one instant in their ids' order."""
    if isinstance(transcript, dict):
        out = {key: linked_in_order(item) for key, item in transcript.items()}
        if isinstance(out.get("evidence_links"), list):
            out["evidence_links"] = sorted(out["evidence_links"])
        return out  # type: ignore[return-value]
    if isinstance(transcript, list):
        return [linked_in_order(item) for item in transcript]
    return transcript


def _key(value: Any, seen: dict[str, int]) -> tuple[str, list[int]]:
    """How to order ``value`` among tied ones: its masked text, then its ids' first sightings
    (an id not seen before counts as last)."""
    named = _UUID.findall(json.dumps(value, sort_keys=True))
    return _masked(value), [seen.get(found, len(seen)) for found in named]


def _masked(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return _INSTANT.sub("<instant>", _UUID.sub("<id>", text))


def _untied_hits(hits: list[Any], seen: dict[str, int]) -> list[Any]:
    out: list[Any] = []
    start = 0
    while start < len(hits):
        end = start
        while end < len(hits) and _score(hits[end]) == _score(hits[start]):
            end += 1
        run = hits[start:end]
        ranks = [hit.get("ranks") for hit in run]
        ordered = sorted(run, key=lambda hit: _key({**hit, "ranks": None}, seen))
        out += [{**hit, "ranks": rank} for hit, rank in zip(ordered, ranks, strict=True)]
        start = end
    return out


def _untie_conflicts(decision: dict[str, Any], seen: dict[str, int]) -> None:
    """Conflicts of equal similarity come in the order of their records' ids, and the update
    candidate is the first of them: sorted by text, the candidate named only as tied."""
    conflicts = decision["conflicts"]
    conflicts.sort(key=lambda c: (-c.get("similarity", 0), _key(c, seen)))
    tied: dict[Any, list[Any]] = {}
    for conflict in conflicts:
        tied.setdefault(conflict.get("similarity"), []).append(conflict.get("existing_record_id"))
    candidate = decision.get("update_candidate_of")
    if any(len(ids) > 1 and candidate in ids for ids in tied.values()):
        decision["update_candidate_of"] = "<one of equally similar records>"


def _score(hit: Any) -> Any:
    return hit.get("score") if isinstance(hit, dict) else hit
