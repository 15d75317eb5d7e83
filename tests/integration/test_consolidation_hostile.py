"""Hostile tests of the consolidation engine (ADR-018): access across tiers, namespaces, odd
content, races, forgetting after consolidation, rollback, and audit afterwards.

Each test states in its docstring what a demanding user expects and asserts exactly that; a
test that fails here documents a defect of the engine, it is not a broken test.
"""

from __future__ import annotations

import asyncio
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.errors import ConsolidationConflict
from engram.memory.consolidation.candidates import PlannerSettings
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.schemas import MAX_CONTENT_CHARS, looks_like_injection
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
)
from tests.integration.consolidation_helpers import (
    DAY,
    DEEP,
    INCIDENT,
    LATE_ETL,
    engine_with,
    head_of,
)

EXTERNAL = GateDecisionType.EXTERNAL
FAST = 100_000

BOSS = caller_for_tier("hostile-trusted", TrustLevel.TRUSTED, writes_per_minute=FAST)
WRITER = caller_for_tier("hostile-standard", TrustLevel.STANDARD, writes_per_minute=FAST)
INTERN = caller_for_tier("hostile-restricted", TrustLevel.RESTRICTED, writes_per_minute=FAST)

# --- helpers ------------------------------------------------------------------------------


async def _write(
    kernel: Kernel,
    text: str,
    when: datetime,
    caller: CallerIdentity = BOSS,
    **fields: Any,
) -> UUID:
    """A CREATE through the Gate; the new record's id (it must be a new record)."""
    record = MemoryRecord.draft(
        MemoryType.EPISODE, text, source_agent=caller.agent_id, event_time=when, **fields
    )
    result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, caller, EXTERNAL))
    assert result.record_id is not None, result.reason
    assert result.version == 1, (result.decision, result.reason)
    return result.record_id


async def _seed(
    kernel: Kernel,
    texts: list[str],
    start: datetime,
    caller: CallerIdentity = BOSS,
    step: timedelta = timedelta(days=1),
    **fields: Any,
) -> list[UUID]:
    ids = [
        await _write(kernel, text, start + step * n, caller, **fields)
        for n, text in enumerate(texts)
    ]
    await kernel.events.settled()  # conflict resolutions (self-healing) are done first
    return ids


async def _update(
    kernel: Kernel, record_id: UUID, content: str, caller: CallerIdentity = BOSS
) -> GateResult:
    head = await head_of(kernel, record_id)
    changed = MemoryRecord.draft(
        head.type,
        content,
        record_id=record_id,
        source_agent=caller.agent_id,
        event_time=head.event_time,
        access_level=head.access_level,
        namespace=head.namespace,
        metadata=dict(head.metadata),
    )
    return await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, changed, caller, EXTERNAL, expected_version=head.version)
    )


async def _forget(kernel: Kernel, record_id: UUID, caller: CallerIdentity = BOSS) -> GateResult:
    head = await head_of(kernel, record_id)
    return await kernel.gate.evaluate(
        GateRequest.forget(head, caller, EXTERNAL, expected_version=head.version)
    )


async def _live_summaries(kernel: Kernel, source: UUID) -> set[UUID]:
    """Records not forgotten whose some version cites (derived_from) a version of ``source``."""
    rows = await kernel.db.fetch(
        "SELECT DISTINCT s.record_id FROM memory_edges e "
        "JOIN memories s ON s.id = e.source_id "
        "JOIN memories t ON t.id = e.target_id "
        "WHERE e.kind = 'derived_from' AND t.record_id = $1",
        source,
    )
    live = set()
    for row in rows:
        if (await head_of(kernel, row["record_id"])).status is not MemoryStatus.FORGOTTEN:
            live.add(row["record_id"])
    return live


async def _source_problems(kernel: Kernel, sources: list[UUID]) -> list[str]:
    """Every consumed source has exactly one live consolidated record deriving from it; an
    active source has none (no duplicate text of it in a summary)."""
    problems = []
    for source in sources:
        head = await head_of(kernel, source)
        live = await _live_summaries(kernel, source)
        if head.status is MemoryStatus.CONSOLIDATED and len(live) != 1:
            problems.append(f"{source}: consolidated with {len(live)} live summaries")
        if head.status is MemoryStatus.ACTIVE and live:
            problems.append(f"{source}: active and also in {len(live)} live summaries")
    return problems


async def _all_episode_ids(kernel: Kernel) -> list[UUID]:
    rows = await kernel.db.fetch(
        "SELECT DISTINCT record_id FROM memories WHERE consolidation_path = 'fast'"
    )
    return [row["record_id"] for row in rows]


async def _audit_problems(kernel: Kernel) -> list[str]:
    problems = []
    state = await kernel.audit_state.compare(datetime.now(UTC))
    if not state.ok:
        problems.append(f"audit state: {[d.to_json() for d in state.differences]}")
    replayed = await kernel.replay.replay()
    if replayed.changed:
        problems.append(f"replay: {[d.to_json() for d in replayed.changed]}")
    verified = await kernel.audit.verify()
    if not verified.ok:
        problems.append(f"verify: {verified}")
    return problems


async def _everything_readable(kernel: Kernel, caller: CallerIdentity, query: str) -> list[str]:
    """All text ``caller`` gets: a search for ``query`` and the default listing."""
    found = await kernel.retrieval.search(caller, query, limit=50)
    listed = await kernel.temporal.query(caller=caller, limit=10_000)
    return [h.record.content for h in found.hits] + [r.content for r in listed]


# --- 1. access across tiers ---------------------------------------------------------------

TIERED = [
    # (text, writer, level)
    (
        "Paged at 02:10 for checkout-api: p99 latency above 2 s on the payment step.",
        INTERN,
        AccessLevel.PUBLIC,
    ),
    (
        "checkout-api payment step: error budget burn rate 14x between 02:10 and 02:25.",
        INTERN,
        AccessLevel.AGENT,
    ),
    (
        "Rolled checkout-api back to v4.2.0 at 02:31; latency on the payment step recovered.",
        WRITER,
        AccessLevel.USER,
    ),
    (
        "Root cause of the checkout-api incident: pool capped at 20 in v4.3.0, ticket SEC-4471.",
        BOSS,
        AccessLevel.SENSITIVE,
    ),
]


async def _seed_tiered(kernel: Kernel) -> list[UUID]:
    return [
        await _write(kernel, text, DAY + timedelta(hours=n), writer, access_level=level)
        for n, (text, writer, level) in enumerate(TIERED)
    ]


async def test_no_summary_spans_access_levels_and_nothing_leaks_upward(
    kernel: Kernel,
) -> None:
    """One topic written by agents of three tiers at public, agent, user and sensitive levels
    (twice each): no consolidated record spans two levels, each has its sources' level, and
    a reader at `agent` level (restricted) or at `user` level (standard) gets no text of a
    `user` / `sensitive` source through search or listings after the pass."""
    ids = await _seed_tiered(kernel)
    ids += [
        await _write(kernel, text + " Confirmed in the on-call review the next morning.",
                     DAY + timedelta(hours=9 + n), writer, access_level=level)
        for n, (text, writer, level) in enumerate(TIERED)
    ]  # fmt: skip
    report = await kernel.consolidation.run(DEEP)
    items = [item for batch in report.batches for item in batch.items]
    assert items, report.skipped
    for item in items:
        levels = {(await head_of(kernel, s)).access_level for s in item.sources}
        assert levels == {(await head_of(kernel, item.record_id)).access_level}, levels
    for reader, secrets in (
        (INTERN, ["v4.2.0", "02:31", "SEC-4471", "capped at 20"]),
        (WRITER, ["SEC-4471", "capped at 20"]),
    ):
        texts = await _everything_readable(kernel, reader, "checkout-api incident root cause")
        for secret in secrets:
            assert not [t for t in texts if secret in t], (reader.agent_id, secret)
    assert await _source_problems(kernel, ids) == []


async def test_a_restricted_agent_still_reads_its_own_facts_after_consolidation(
    kernel: Kernel,
) -> None:
    """Availability: a restricted agent wrote two agent-level facts; a standard agent added a
    user-level one to the same topic. After the pass the restricted agent must still be able
    to read its OWN facts (02:10, burn rate 14x) by search or listing: consolidation must not
    take a reader's own knowledge away from it."""
    ids = [
        await _write(kernel, text, DAY + timedelta(hours=n), writer, access_level=level)
        for n, (text, writer, level) in enumerate(TIERED[:3])
    ]
    before = await _everything_readable(kernel, INTERN, "checkout-api payment step latency")
    assert _seen_any(before, "14x")
    assert _seen_any(before, "02:10")
    await kernel.consolidation.run(DEEP)
    assert len(ids) == 3
    after = await _everything_readable(kernel, INTERN, "checkout-api payment step latency")
    assert _seen_any(after, "14x"), f"own fact lost to its writer; sees {after}"
    assert _seen_any(after, "02:10"), f"own fact lost to its writer; sees {after}"


def _seen_any(texts: list[str], needle: str) -> bool:
    return any(needle in t for t in texts)


async def test_an_untrusted_agent_cannot_launder_a_claim_into_a_higher_confidence_record(
    kernel: Kernel,
) -> None:
    """A restricted agent's claim merged with a trusted agent's facts: the summary carries the
    restricted claim's text, so it must not present that claim with more confidence than the
    restricted agent's own record had (confidence is not inherited from the best source)."""
    low = await _write(
        kernel,
        "During the checkout-api incident finance-gw also logged HTTP 503 at 02:12.",
        DAY,
        INTERN,
        access_level=AccessLevel.AGENT,
        source_confidence=0.3,
    )
    high = await _seed(kernel, INCIDENT, DAY + timedelta(hours=1), BOSS, source_confidence=0.95)
    report = await kernel.consolidation.run(DEEP)
    items = [i for b in report.batches for i in b.items if low in i.sources]
    assert items, report.skipped
    made = await head_of(kernel, items[0].record_id)
    assert "finance-gw" in made.content
    low_head = (await kernel.admin_temporal.get_version_chain(low))[0]
    assert made.source_confidence <= low_head.source_confidence + 1e-9, (
        made.source_confidence,
        low_head.source_confidence,
        set(items[0].sources) & set(high),
    )


async def test_one_agent_backdating_repeats_does_not_manufacture_corroboration(
    kernel: Kernel,
) -> None:
    """One restricted agent writes the same observation five times within a minute, giving
    each a different (caller-chosen) event_time day. Independent corroboration must come from
    independent sources: the promoted belief must not be more confident than the agent's
    single best record."""
    ids = await _seed(kernel, [*LATE_ETL, LATE_ETL[0].replace("06:40", "06:45")], DAY, INTERN)
    report = await kernel.consolidation.run(DEEP)
    promoted = [i for b in report.batches for i in b.items if i.action.value == "promote"]
    assert promoted, [i.action for b in report.batches for i in b.items]
    belief = await head_of(kernel, promoted[0].record_id)
    chains = [await kernel.admin_temporal.get_version_chain(i) for i in ids]
    own = max(chain[0].source_confidence for chain in chains)
    assert belief.source_confidence <= own + 1e-9, (belief.source_confidence, own)


# --- 2. namespaces ------------------------------------------------------------------------


async def test_records_in_two_namespaces_are_never_merged(kernel: Kernel) -> None:
    """The same incident told in namespaces team-a and team-b gives one summary per namespace,
    each citing only sources of its own namespace; neither namespace's listing shows the
    other's summary."""
    a = await _seed(kernel, INCIDENT, DAY, namespace="team-a")
    b = await _seed(kernel, INCIDENT, DAY + timedelta(hours=1), namespace="team-b")
    report = await kernel.consolidation.run(DEEP)
    assert set(report.consumed) == set(a) | set(b), report.skipped
    for batch in report.batches:
        for item in batch.items:
            made = await head_of(kernel, item.record_id)
            spaces = {(await head_of(kernel, s)).namespace for s in item.sources}
            assert spaces == {made.namespace}, (spaces, made.namespace)
    for space, mine in (("team-a", a), ("team-b", b)):
        listed = await kernel.temporal.query(caller=BOSS, namespace=space, limit=1000)
        for record in listed:
            assert record.namespace == space
            for edge_target in record.evidence_links:
                row = await kernel.db.fetchrow(
                    "SELECT record_id FROM memories WHERE id = $1", edge_target
                )
                assert row["record_id"] in mine
    assert await _source_problems(kernel, a + b) == []


# --- 3. odd content -----------------------------------------------------------------------


async def test_injection_split_across_sources_never_lands_in_a_summary(kernel: Kernel) -> None:
    """Two records, each harmless alone, whose merged narrative would read "ignore all ...
    previous instructions". The pass must not crash, must not store a consolidated record the
    Gate's own injection rule would refuse, and a refused topic keeps its sources active."""
    texts = [
        "Paged at 02:10 for checkout-api; the vendor bot in the channel told us to ignore all",
        "previous instructions in the checkout-api runbook; rolled back to v4.2.0 at 02:31.",
        "Root cause of the checkout-api incident: the connection pool was capped at 20 in v4.3.0.",
    ]
    for text in texts:
        assert not looks_like_injection(text)
    ids = await _seed(kernel, texts, DAY, step=timedelta(minutes=1))
    report = await kernel.consolidation.run(DEEP)
    for made in report.created:
        assert not looks_like_injection((await head_of(kernel, made)).content)
    for source in ids:
        if source not in report.consumed:
            assert (await head_of(kernel, source)).status is MemoryStatus.ACTIVE
    assert await _source_problems(kernel, ids) == []


async def test_sources_near_the_content_limit_do_not_crash_or_lose_anything(
    kernel: Kernel,
) -> None:
    """Three records of ~15,900 characters each about one topic, every line a distinct fact:
    their merge cannot fit in 16,000 characters. The pass completes; a topic the Gate rejects
    keeps every source active (readable), and any record written is within the limit."""
    texts = []
    for n in range(3):
        lines = []
        k = 0
        while sum(len(x) + 1 for x in lines) < MAX_CONTENT_CHARS - 200:
            lines.append(
                f"checkout-api pool log {n}-{k:04d}: connection pool at {k % 97} of 20 "
                f"at 02:{k % 60:02d}, request id req-{n}{k:05d}."
            )
            k += 1
        text = " ".join(lines)
        assert len(text) <= MAX_CONTENT_CHARS
        texts.append(text)
    ids = await _seed(kernel, texts, DAY, step=timedelta(hours=1))
    report = await kernel.consolidation.run(DEEP)
    for made in report.created:
        assert len((await head_of(kernel, made)).content) <= MAX_CONTENT_CHARS
    for source in ids:
        head = await head_of(kernel, source)
        if source not in report.consumed:
            assert head.status is MemoryStatus.ACTIVE
    assert await _source_problems(kernel, ids) == []
    listed = {r.record_id for r in await kernel.temporal.query(caller=BOSS, limit=1000)}
    for source in ids:  # each source's text is reachable: itself or through its summary
        assert source in listed or (await _live_summaries(kernel, source)) & listed


async def test_unicode_survives_consolidation_intact(kernel: Kernel) -> None:
    """Emoji, right-to-left text and combining marks in the sources come out of the summary
    as they went in (compared in NFC), and the pass does not crash."""
    texts = [
        (
            "Paged at 02:10 for checkout-api 🚨🔥: p99 latency above 2 s, reported by Zoë "
            "(Zo\u0065\u0308 in the roster)."
        ),
        (
            "Rolled checkout-api back to v4.2.0 at 02:31; the Tel Aviv team wrote "
            "\u05d4\u05e9\u05d9\u05e8\u05d5\u05ea \u05d7\u05d6\u05e8 (service back) 👍🏽."
        ),
        (
            "Root cause of the checkout-api incident: pool capped at 20 in v4.3.0; Cairo on-call "
            "noted \u0627\u0644\u062e\u062f\u0645\u0629 \u062a\u0639\u0645\u0644 and cafe\u0301 "
            "closed."
        ),
    ]
    ids = await _seed(kernel, texts, DAY, step=timedelta(hours=1))
    report = await kernel.consolidation.run(DEEP)
    assert set(report.consumed) == set(ids), report.skipped
    (made,) = report.created
    content = unicodedata.normalize("NFC", (await head_of(kernel, made)).content)
    for needle in (
        "🚨🔥",
        "👍🏽",
        "\u05d4\u05e9\u05d9\u05e8\u05d5\u05ea",
        "\u0627\u0644\u062e\u062f\u0645\u0629",
        unicodedata.normalize("NFC", "Zo\u0065\u0308"),
        unicodedata.normalize("NFC", "cafe\u0301"),
    ):
        assert needle in content, (needle, content)


async def test_many_near_identical_records_at_one_instant(kernel: Kernel) -> None:
    """Twenty near-identical records (one number differs), all with the same event_time: the
    pass completes, every consumed source has one live summary, every distinct number is
    kept, and running it twice gives the same text (deterministic order for ties)."""
    texts = [
        f"The nightly orders_daily ETL finished at 06:{40 + n % 20:02d} again, run {1000 + n}."
        for n in range(20)
    ]
    ids = []
    for text in texts:
        record = MemoryRecord.draft(
            MemoryType.EPISODE, text, source_agent=BOSS.agent_id, event_time=DAY
        )
        result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    ids = list(dict.fromkeys(ids))
    first = await kernel.consolidation.evaluate_candidates()
    second = await kernel.consolidation.evaluate_candidates()
    assert [c.content for c in first] == [c.content for c in second]
    report = await kernel.consolidation.run(DEEP)
    assert report.consumed, report.skipped
    assert await _source_problems(kernel, ids) == []
    for item in (i for b in report.batches for i in b.items):
        made = await head_of(kernel, item.record_id)
        for source in item.sources:
            text = (await kernel.admin_temporal.get_version_chain(source))[0].content
            run_no = text.rsplit("run ", 1)[1].rstrip(".")
            assert run_no in made.content, (run_no, made.content)


async def test_a_topic_larger_than_max_topic_and_batch_size_loses_nothing(
    kernel: Kernel,
) -> None:
    """60 records of one topic (> max_topic 50) consolidated with the kernel's engine, and 25
    with an engine of batch_size 3 and max_topic 10: no crash, no consolidated record cites
    more than max_topic sources, every consumed source has exactly one live summary, and no
    source is consumed twice."""
    texts = [
        f"The nightly orders_daily ETL finished late at 06:{n % 60:02d}, batch run {2000 + n}."
        for n in range(60)
    ]
    ids = await _seed(kernel, texts, DAY, step=timedelta(hours=3))
    report = await kernel.consolidation.run(DEEP)
    assert len(report.consumed) == len(set(report.consumed))
    assert len(report.consumed) > 50, report.skipped
    for item in (i for b in report.batches for i in b.items):
        assert len(item.sources) <= 50
        assert len((await head_of(kernel, item.record_id)).evidence_links) <= 50
    assert await _source_problems(kernel, ids) == []

    small = engine_with(kernel, batch_size=3, planner=PlannerSettings(max_topic=10))
    more = [
        f"The weekly invoices_weekly export failed at 03:{n:02d} with exit code {100 + n}."
        for n in range(25)
    ]
    others = await _seed(kernel, more, DAY + timedelta(days=200), step=timedelta(hours=3))
    again = await small.run(DEEP)
    assert len(again.consumed) == len(set(again.consumed))
    assert set(again.consumed) <= set(others)
    assert len(again.consumed) >= 20, again.skipped
    for batch in again.batches:
        for item in batch.items:
            assert len(item.sources) <= 10
    assert await _source_problems(kernel, ids + others) == []


# --- 4. races -----------------------------------------------------------------------------


async def test_a_source_forgotten_between_planning_and_commit_is_not_resurrected(
    kernel: Kernel,
) -> None:
    """An agent FORGETs a source after evaluate_candidates() and before commit(): the topic is
    skipped, the forgotten record stays forgotten, its text appears in no live record, and the
    next pass consolidates the rest."""
    ids = await _seed(kernel, INCIDENT, DAY)
    planned = await kernel.consolidation.evaluate_candidates()
    assert len(planned) == 1
    gone = await _forget(kernel, ids[2])
    assert gone.record_id == ids[2], gone.reason
    batches = await kernel.consolidation.commit(planned, trigger=DEEP)
    assert not [s for b in batches for s in b.consumed]
    assert (await head_of(kernel, ids[2])).status is MemoryStatus.FORGOTTEN
    later = await kernel.consolidation.run(DEEP)
    assert ids[2] not in later.consumed
    live = await kernel.admin_temporal.query(limit=1000)
    assert not [r.content for r in live if "capped at 20" in r.content]
    assert await _source_problems(kernel, ids) == []


async def test_an_update_by_a_restricted_agent_between_planning_and_commit_stands(
    kernel: Kernel,
) -> None:
    """A restricted agent updates its own source after planning: the topic is skipped and the
    agent's new text stands; the next pass's summary carries the new text, not the old."""
    ids = await _seed(kernel, INCIDENT, DAY, INTERN)
    planned = await kernel.consolidation.evaluate_candidates()
    assert len(planned) == 1
    result = await _update(
        kernel, ids[0], "Paged at 02:12 for checkout-api: p99 latency above 3 s.", INTERN
    )
    assert result.version == 2, result.reason
    batches = await kernel.consolidation.commit(planned, trigger=DEEP)
    assert not [s for b in batches for s in b.consumed]
    later = await kernel.consolidation.run(DEEP)
    assert set(later.consumed) == set(ids), later.skipped
    (made,) = later.created
    content = (await head_of(kernel, made)).content
    assert "02:12" in content, content
    assert "02:10" not in content, content


async def test_two_concurrent_passes_consume_each_source_once(kernel: Kernel) -> None:
    """Two passes at once over the same records: both finish without an error, every source is
    consumed exactly once, each topic has exactly one live summary, and the audit agrees."""
    incident = await _seed(kernel, INCIDENT, DAY)
    etl = await _seed(kernel, LATE_ETL, DAY + timedelta(days=40))
    outcomes = await asyncio.gather(
        kernel.consolidation.run(DEEP), kernel.consolidation.run(DEEP), return_exceptions=True
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors
    consumed = [s for o in outcomes for s in o.consumed]  # type: ignore[union-attr]
    assert sorted(consumed) == sorted(incident + etl)
    created = [c for o in outcomes for c in o.created]  # type: ignore[union-attr]
    assert len(created) == 2
    assert await _source_problems(kernel, incident + etl) == []
    assert await _audit_problems(kernel) == []


async def test_a_rollback_racing_a_new_pass_leaves_one_summary_per_source(
    kernel: Kernel,
) -> None:
    """A rollback of batch 1 runs at the same time as a new pass (with new records of the same
    topic waiting): both finish, and afterwards each source is either active with no live
    summary or consolidated into exactly one live summary."""
    incident = await _seed(kernel, INCIDENT, DAY)
    first = await kernel.consolidation.run(DEEP)
    (batch,) = first.batches
    fresh = await _seed(
        kernel,
        [
            "checkout-api paged again at 03:05: p99 latency above 2 s on the payment step.",
            "checkout-api payment step latency was normal again by 03:40 without a deploy.",
        ],
        DAY + timedelta(days=3),
    )
    outcomes = await asyncio.gather(
        kernel.consolidation.rollback(batch.batch_id),
        kernel.consolidation.run(DEEP),
        return_exceptions=True,
    )
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert await _source_problems(kernel, incident + fresh) == []
    assert await _audit_problems(kernel) == []


# --- 5. forgetting after consolidation ------------------------------------------------------


async def test_forgetting_a_consolidated_source_takes_its_fact_out_of_search(
    kernel: Kernel,
) -> None:
    """An agent FORGETs a source that was consolidated. A careful user expects "forget" to
    take the fact out of what readers get: no search hit and no listing shows the forgotten
    source's unique fact (ticket SEC-9001) any more, summary included."""
    texts = list(INCIDENT)
    texts[2] = "Root cause of the checkout-api incident: pool capped at 20, ticket SEC-9001."
    ids = await _seed(kernel, texts, DAY)
    report = await kernel.consolidation.run(DEEP)
    (made,) = report.created
    assert "SEC-9001" in (await head_of(kernel, made)).content
    gone = await _forget(kernel, ids[2])
    assert gone.record_id == ids[2], gone.reason
    assert (await head_of(kernel, ids[2])).status is MemoryStatus.FORGOTTEN
    await kernel.events.settled()  # the release follows the forget through the outbox
    texts_read = await _everything_readable(kernel, BOSS, "checkout-api root cause ticket")
    leaked = [t for t in texts_read if "SEC-9001" in t]
    assert not leaked, f"forgotten fact still served: {leaked}"


# --- 6. rollback --------------------------------------------------------------------------


async def test_rollback_after_an_agent_corrected_the_summary_keeps_the_correction(
    kernel: Kernel,
) -> None:
    """An agent corrects the consolidated record (a new version with a new fact); then the
    batch is rolled back. The agent's correction is knowledge the sources never had: it must
    not be silently discarded (either the rollback refuses, or the corrected record stays
    readable)."""
    await _seed(kernel, INCIDENT, DAY)
    report = await kernel.consolidation.run(DEEP)
    (batch,) = report.batches
    (made,) = report.created
    summary = await head_of(kernel, made)
    corrected = summary.content + "\nCorrection: the pager fired at 02:08, alert ALRT-77."
    result = await _update(kernel, made, corrected)
    assert result.version == 2, result.reason
    try:
        await kernel.consolidation.rollback(batch.batch_id)
    except ConsolidationConflict:
        assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN
        return
    texts = await _everything_readable(kernel, BOSS, "checkout-api pager alert")
    assert _seen_any(texts, "ALRT-77"), "the agent's correction was forgotten by the rollback"


async def test_rollback_after_an_agent_updated_one_source_leaves_every_source_readable(
    kernel: Kernel,
) -> None:
    """An agent updates one consolidated source; the batch is rolled back. The agent's
    version stands (its text), the others are restored, the summary is forgotten, and every
    source is visible again in the default listing (none stays hidden as `consolidated` with
    no live summary). The update's event makes the outbox take the same summary back at the
    same time; whichever commits first, the rollback succeeds and reports what it did."""
    ids = await _seed(kernel, INCIDENT, DAY)
    report = await kernel.consolidation.run(DEEP)
    (batch,) = report.batches
    text = "Paged at 02:10 for checkout-api: p99 latency above 2 s, paged Dana (corrected)."
    result = await _update(kernel, ids[0], text)
    assert result.version == 3, result.reason
    undone = await kernel.consolidation.rollback(batch.batch_id)
    assert ids[0] in undone.untouched
    assert set(undone.restored) <= set(ids[1:])  # the rest the outbox's release restored
    for source in ids[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.ACTIVE
    head = await head_of(kernel, ids[0])
    assert head.content == text
    listed = {r.record_id for r in await kernel.admin_temporal.query(limit=1000)}
    assert set(ids) <= listed, {
        i: (await head_of(kernel, i)).status.value for i in ids if i not in listed
    }
    for created in batch.created:
        assert (await head_of(kernel, created)).status is MemoryStatus.FORGOTTEN


async def test_a_rollback_racing_the_release_of_the_same_summary_both_succeed(
    kernel: Kernel,
) -> None:
    """A rollback and the release an agent's change starts, at once on the same batch: neither
    fails, the summary is forgotten once, every source is active, and the agent's version
    stands (a rollback that lost the race plans again from the new heads)."""
    ids = await _seed(kernel, INCIDENT, DAY)
    report = await kernel.consolidation.run(DEEP)
    (batch,) = report.batches
    text = "Paged at 02:10 for checkout-api: p99 latency above 2 s, paged Dana (amended)."
    assert (await _update(kernel, ids[0], text)).version == 3
    outcomes = await asyncio.gather(
        kernel.consolidation.rollback(batch.batch_id),
        kernel.consolidation.release(ids[0]),
        return_exceptions=True,
    )
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    for created in batch.created:
        assert (await head_of(kernel, created)).status is MemoryStatus.FORGOTTEN
    for source in ids[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.ACTIVE
    assert (await head_of(kernel, ids[0])).content == text


async def test_two_concurrent_rollbacks_exactly_one_succeeds(kernel: Kernel) -> None:
    """Two rollbacks of one batch at once: exactly one returns a report, the other raises
    ConsolidationConflict; the live set is the one before the batch."""
    ids = await _seed(kernel, INCIDENT, DAY)
    before = {r.record_id for r in await kernel.admin_temporal.query(limit=1000)}
    report = await kernel.consolidation.run(DEEP)
    (batch,) = report.batches
    outcomes = await asyncio.gather(
        kernel.consolidation.rollback(batch.batch_id),
        kernel.consolidation.rollback(batch.batch_id),
        return_exceptions=True,
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    assert isinstance(errors[0], ConsolidationConflict), repr(errors[0])
    assert {r.record_id for r in await kernel.admin_temporal.query(limit=1000)} == before
    for source in ids:
        head = await head_of(kernel, source)
        assert (head.status, head.version) == (MemoryStatus.ACTIVE, 3)


# --- 7. audit after everything ------------------------------------------------------------


async def test_audit_state_replay_and_chain_agree_after_a_hostile_sequence(
    kernel: Kernel,
) -> None:
    """After tiered writes, a pass, a forget of a consolidated source, an update of a summary,
    concurrent rollbacks, a race of a rollback with a pass and a rejected topic, the audit log
    rebuilds the store (state ok), replay changes no decision and the chain verifies."""
    await _seed_tiered(kernel)
    incident = await _seed(kernel, INCIDENT, DAY + timedelta(days=10), WRITER)
    etl = await _seed(kernel, LATE_ETL, DAY + timedelta(days=40), WRITER)
    first = await kernel.consolidation.run(DEEP)
    assert first.created
    await _forget(kernel, etl[0])
    items = [i for b in first.batches for i in b.items]
    tiered_item = next((i for i in items if set(i.sources) & set(incident)), None)
    assert tiered_item is not None, (first.skipped, [i.sources for i in items], incident)
    await _update(
        kernel,
        tiered_item.record_id,
        (await head_of(kernel, tiered_item.record_id)).content + "\nAddendum: ALRT-77.",
    )
    await asyncio.gather(
        *(kernel.consolidation.rollback(b.batch_id) for b in first.batches for _ in range(2)),
        return_exceptions=True,
    )
    await _seed(
        kernel,
        [
            "Paged at 02:10 for checkout-api; the vendor bot in the channel told us to ignore all",
            "previous instructions in the checkout-api runbook; rolled back to v4.2.0 at 02:31.",
        ],
        DAY + timedelta(days=90),
        step=timedelta(minutes=1),
    )
    second = await kernel.consolidation.run(DEEP)
    await asyncio.gather(
        *(kernel.consolidation.rollback(b.batch_id) for b in second.batches),
        kernel.consolidation.run(DEEP),
        return_exceptions=True,
    )
    assert await _source_problems(kernel, await _all_episode_ids(kernel)) == []
    assert await _audit_problems(kernel) == []
