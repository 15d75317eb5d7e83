"""Bi-temporal reads through kernel.temporal, case by case (docs/temporal.md)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import asyncpg
import pytest

from engram import Kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.temporal.reads import ReadRecorder
from engram.memory.types import (
    AccessLevel,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
    utc_now,
)
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import EXTERNAL, STANDARD, SYSTEM, belief, create, update

JAN = datetime(2026, 1, 1, tzinfo=UTC)
FEB = datetime(2026, 2, 1, tzinfo=UTC)
MAR = datetime(2026, 3, 1, tzinfo=UTC)
APR = datetime(2026, 4, 1, tzinfo=UTC)
DEC_BEFORE = datetime(2025, 12, 1, tzinfo=UTC)
WRITER = replace(STANDARD, writes_per_minute=100_000)

When = tuple[datetime | None, datetime | None]


def _mid(a: datetime, b: datetime) -> datetime:
    return a + (b - a) / 2


class Timeline:
    """Two versions of one record and the instants around them."""

    def __init__(self, record_id: UUID, t1: datetime, t2: datetime) -> None:
        self.record_id = record_id
        self.before = t1 - timedelta(milliseconds=1)
        self.between = _mid(t1, t2)
        self.after = t2 + timedelta(milliseconds=1)


async def _two_versions(kernel: Kernel, first_event: datetime, second_event: datetime) -> Timeline:
    first = await kernel.gate.evaluate(
        create(belief("The deploy target is v2.0.", event_time=first_event), WRITER)
    )
    assert first.modified_record is not None
    assert first.record_id is not None
    second = await kernel.gate.evaluate(
        update(first.record_id, "The deploy target is v2.1.", 1, WRITER, event_time=second_event)
    )
    assert second.modified_record is not None
    return Timeline(
        first.record_id, first.modified_record.ingestion_time, second.modified_record.ingestion_time
    )


async def _version(
    kernel: Kernel,
    record_id: UUID,
    *,
    as_of_ingestion: datetime | None = None,
    as_of_event: datetime | None = None,
) -> int | None:
    found = await kernel.temporal.query(
        record_id=record_id, as_of_ingestion=as_of_ingestion, as_of_event=as_of_event
    )
    assert len(found) <= 1
    return found[0].version if found else None


async def _answers(
    kernel: Kernel, record_id: UUID, cases: dict[When, int | None]
) -> dict[When, int | None]:
    return {
        key: await _version(kernel, record_id, as_of_ingestion=key[0], as_of_event=key[1])
        for key in cases
    }


async def test_forward_update_every_combination(kernel: Kernel) -> None:
    """v1 true from January, v2 from March: each (T, E) gets the version believed then."""
    tl = await _two_versions(kernel, JAN, MAR)
    cases: dict[When, int | None] = {
        (tl.before, None): None,
        (tl.between, None): 1,
        (tl.after, None): 2,
        (None, DEC_BEFORE): None,
        (None, FEB): 1,
        (None, APR): 2,
        (tl.before, FEB): None,
        (tl.between, FEB): 1,
        (tl.between, APR): 1,
        (tl.after, FEB): 1,
        (tl.after, APR): 2,
        (tl.after, DEC_BEFORE): None,
    }
    assert cases == await _answers(kernel, tl.record_id, cases)


async def test_correction_of_the_past_every_combination(kernel: Kernel) -> None:
    """v1 said "since March"; v2 corrects it to "since January": old beliefs stay answerable."""
    tl = await _two_versions(kernel, MAR, JAN)
    cases: dict[When, int | None] = {
        (tl.before, None): None,
        (tl.between, None): 1,
        (tl.after, None): 2,
        (tl.between, FEB): None,  # at T1 nothing was believed true in February
        (tl.between, APR): 1,
        (tl.after, DEC_BEFORE): None,
        (tl.after, FEB): 2,  # now we know the January version held in February
        (tl.after, APR): 2,  # and it, not v1, holds in April
        (None, FEB): 2,
        (None, APR): 2,
        (None, DEC_BEFORE): None,
    }
    assert cases == await _answers(kernel, tl.record_id, cases)


async def test_forget_ends_both_intervals(kernel: Kernel) -> None:
    """After FORGET the record is gone from then on, but what was believed before stays."""
    first = await kernel.gate.evaluate(
        create(belief("The VPN uses WireGuard.", event_time=JAN), WRITER)
    )
    assert first.modified_record is not None
    assert first.record_id is not None
    forgotten = await kernel.gate.evaluate(
        GateRequest.forget(first.modified_record, WRITER, EXTERNAL)
    )
    assert forgotten.modified_record is not None
    t1 = first.modified_record.ingestion_time
    tf = forgotten.modified_record.ingestion_time_end
    assert tf is not None
    assert forgotten.modified_record.event_time_end is not None
    rid = first.record_id
    assert 1 == await _version(kernel, rid, as_of_ingestion=_mid(t1, tf))
    assert 1 == await _version(kernel, rid, as_of_ingestion=_mid(t1, tf), as_of_event=FEB)
    assert await _version(kernel, rid) is None
    assert await _version(kernel, rid, as_of_event=FEB) is None
    assert await _version(kernel, rid, as_of_ingestion=tf + timedelta(milliseconds=1)) is None
    kept = await kernel.temporal.query(record_id=rid, include_forgotten=True)
    assert ["forgotten"] == [r.status.value for r in kept]
    assert 1 == len(await kernel.temporal.get_version_chain(rid))


async def test_history_as_of_an_instant(kernel: Kernel) -> None:
    """include_superseded lists every version known at T, oldest first."""
    tl = await _two_versions(kernel, JAN, MAR)
    history = await kernel.temporal.query(record_id=tl.record_id, include_superseded=True)
    assert [1, 2] == [r.version for r in history]
    earlier = await kernel.temporal.query(
        record_id=tl.record_id, include_superseded=True, as_of_ingestion=tl.between
    )
    assert [1] == [r.version for r in earlier]


async def test_readers_see_only_their_levels(kernel: Kernel) -> None:
    """Sensitive records reach only callers cleared for them; user-level ones not agents."""
    trusted = caller_for_tier("t", TrustLevel.TRUSTED)
    restricted = caller_for_tier("r", TrustLevel.RESTRICTED)
    secret = await kernel.gate.evaluate(
        create(belief("Payroll runs on the 25th.", access_level=AccessLevel.SENSITIVE), trusted)
    )
    internal = await kernel.gate.evaluate(
        create(belief("The office wifi is guest-only.", access_level=AccessLevel.USER), WRITER)
    )
    assert secret.record_id is not None
    assert internal.record_id is not None
    for caller, expected in [(trusted, 1), (STANDARD, 0), (restricted, 0)]:
        found = await kernel.temporal.query(record_id=secret.record_id, caller=caller)
        assert expected == len(found), caller.trust_level
        chain = await kernel.temporal.get_version_chain(secret.record_id, caller=caller)
        assert expected == len(chain), caller.trust_level
    assert 1 == len(await kernel.temporal.query(record_id=internal.record_id, caller=STANDARD))
    assert [] == await kernel.temporal.query(record_id=internal.record_id, caller=restricted)


async def test_listing_filters_by_type_and_orders_newest_first(kernel: Kernel) -> None:
    """A listing returns one version per live record of the asked types, newest change first."""
    ids = []
    for n in range(5):
        result = await kernel.gate.evaluate(
            create(belief(f"Queue {n} holds {n * 11} jobs."), WRITER)
        )
        ids.append(result.record_id)
    episode = MemoryRecord.draft(
        MemoryType.EPISODE,
        "The queue stalled at noon.",
        source_agent="agent-standard",
        event_time=FEB,
    )
    await kernel.gate.evaluate(create(episode, WRITER))
    assert ids[0] is not None
    await kernel.gate.evaluate(update(ids[0], "Queue 0 holds 99 jobs.", 1, WRITER))
    listed = await kernel.temporal.query(types=[MemoryType.BELIEF], limit=3)
    assert [ids[0], ids[4], ids[3]] == [r.record_id for r in listed]
    assert 2 == listed[0].version
    assert 6 == len(await kernel.temporal.query(limit=50))
    assert [] == await kernel.temporal.query(namespace="elsewhere")


async def test_reads_are_counted_without_versions_or_audit_rows(kernel: Kernel) -> None:
    """Reading updates the access statistics only, reinforcing at most five reads a day."""
    created = await kernel.gate.evaluate(create(belief("Docs live in Confluence."), WRITER))
    assert created.record_id is not None
    for _ in range(7):
        await kernel.temporal.query(record_id=created.record_id)
    await kernel.temporal.get_version_chain(created.record_id)
    await kernel.temporal.flush_reads()
    row = await kernel.db.fetchrow(
        "SELECT access_count[5] AS access_count, reinforcements[5] AS reinforcements"
        " FROM memory_access WHERE record_id = $1",
        created.record_id,
    )
    assert row is not None
    assert (8, 5.0) == (row["access_count"], row["reinforcements"])
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")


async def test_closing_waits_for_a_flush_in_progress_and_loses_no_read(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A flush held up by a real lock on the access table while the recorder closes (a
    shutdown): closing waits for it, and every read is counted once."""
    created = await kernel.gate.evaluate(create(belief("Docs live in Confluence."), WRITER))
    assert created.record_id is not None
    recorder = ReadRecorder(kernel.db, interval=0.0)
    admin = await asyncpg.connect(database.admin_url)
    try:
        locked = admin.transaction()
        await locked.start()
        await admin.execute("LOCK TABLE engram.memory_access IN EXCLUSIVE MODE")
        recorder.note([(created.record_id, AccessLevel.AGENT)] * 3)
        for _ in range(500):  # until the flush waits for the lock
            waiting = await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert waiting
        closing = asyncio.create_task(recorder.close())
        await asyncio.sleep(0.2)
        assert not closing.done()  # it waits for the flush rather than cancelling it
        await locked.rollback()
        await closing
    finally:
        await admin.close()
    count = await kernel.db.fetchval(
        "SELECT access_count[5] FROM memory_access WHERE record_id = $1", created.record_id
    )
    assert 3 == count


async def test_decay_grows_with_reads_falls_with_time_and_is_observed(kernel: Kernel) -> None:
    """A record's relevance rises with (capped) reads and falls with time; it is measured."""
    created = await kernel.gate.evaluate(create(belief("Sprint demos are on Fridays."), WRITER))
    assert created.record_id is not None
    fresh = await kernel.temporal.compute_decay(created.record_id)
    later = await kernel.temporal.compute_decay(
        created.record_id, now=datetime.now(UTC) + timedelta(days=60)
    )
    for _ in range(3):
        await kernel.temporal.query(record_id=created.record_id)
    await kernel.temporal.flush_reads()
    read = await kernel.temporal.compute_decay(created.record_id)
    assert later < fresh < read <= 1.0
    observed = kernel.metrics.registry.get_sample_value(
        "engram_decay_score_count", {"type": "belief"}
    )
    assert 3 == observed
    unknown = MemoryRecord.draft(MemoryType.BELIEF, "x", source_agent="a").id
    with pytest.raises(LookupError):
        await kernel.temporal.compute_decay(unknown)


# One rule for every read path (docs/temporal.md, "The rule"): without an event instant a read
# answers what the kernel believes (ingestion axis only, validity not filtered); with one, what
# was true then. Record reads, the "now" listing and the as-of listings must agree.

Answer = dict[UUID, tuple[int, str]]


async def _approved(kernel: Kernel, request: GateRequest) -> MemoryRecord:
    result = await kernel.gate.evaluate(request)
    assert result.approved, result.reason
    assert result.modified_record is not None
    return result.modified_record


async def _restate(kernel: Kernel, head: MemoryRecord, status: MemoryStatus) -> None:
    """A new version with the same content and ``status``, as an internal origin writes it."""
    proposal = head.model_copy(update={"id": uuid4(), "status": status})
    await _approved(
        kernel,
        GateRequest(
            GateAction.UPDATE,
            proposal,
            SYSTEM,
            GateDecisionType.SELF_HEALING,
            expected_version=head.version,
            status=status,
        ),
    )


async def _states(kernel: Kernel) -> dict[str, UUID]:
    """Records in every state a listing has to decide about, by name."""
    next_year = utc_now() + timedelta(days=365)
    ids: dict[str, UUID] = {}

    async def write(name: str, record: MemoryRecord) -> MemoryRecord:
        written = await _approved(kernel, create(record, WRITER))
        ids[name] = written.record_id
        return written

    await write("plain", belief("The staging cluster runs in Frankfurt."))
    updated = await write("updated", belief("Release trains leave on Thursdays.", event_time=JAN))
    await _approved(
        kernel, update(updated.record_id, "Release trains leave on Wednesdays.", 1, WRITER)
    )
    ended = belief("The change freeze held through January.", event_time=JAN)
    await write("ended", ended.model_copy(update={"event_time_end": FEB}))
    await write("future", belief("The office moves to the Lyon campus.", event_time=next_year))
    gateway = await write("future_update", belief("The VPN gateway is 10.0.0.1.", event_time=JAN))
    await _approved(
        kernel,
        update(gateway.record_id, "The VPN gateway is 10.0.0.2.", 1, WRITER, event_time=next_year),
    )
    printer = await write("forgotten", belief("The third-floor printer needs a PIN."))
    await _approved(kernel, GateRequest.forget(printer, WRITER, EXTERNAL))
    notes = await write("consolidated", belief("Standup notes go to the team wiki."))
    await _restate(kernel, notes, MemoryStatus.CONSOLIDATED)
    disputed = await write("challenged", belief("Backups are kept for ninety days."))
    await _restate(kernel, disputed, MemoryStatus.CHALLENGED)
    # A supersession resolution (ADR-010) ends the older record's validity in April 2025.
    march, april = datetime(2025, 3, 1, 9, tzinfo=UTC), datetime(2025, 4, 10, 9, tzinfo=UTC)
    await write(
        "superseded", belief("The deploy target for the web app is v2.0.", event_time=march)
    )
    await write(
        "superseding", belief("The deploy target for the web app is v2.1.", event_time=april)
    )
    await kernel.events.settled()
    resolved = await kernel.temporal.current(ids["superseded"], count_read=False)
    assert resolved is not None
    assert (2, april) == (resolved.version, resolved.event_time_end)
    return ids


def _by_record(records: list[MemoryRecord]) -> Answer:
    found = {record.record_id: (record.version, record.status.value) for record in records}
    assert len(found) == len(records), "one version per record"
    return found


async def _agreed(
    kernel: Kernel,
    ids: dict[str, UUID],
    as_of_event: datetime | None,
    *,
    include_forgotten: bool = False,
    include_consolidated: bool = False,
) -> dict[str, tuple[int, str]]:
    """Asserts that record reads and listings, now and just after the last write, give the
    same answers; returns them by state name."""
    last_write = await kernel.db.fetchval(
        "SELECT max(greatest(ingestion_time, ingestion_time_end)) FROM memories"
    )
    after = last_write + timedelta(milliseconds=1)
    flags = {"include_forgotten": include_forgotten, "include_consolidated": include_consolidated}
    reads_now: Answer = {}
    reads_after: Answer = {}
    for record_id in ids.values():
        reads_now |= _by_record(
            await kernel.temporal.query(
                record_id=record_id,
                as_of_event=as_of_event,
                include_forgotten=include_forgotten,
                include_consolidated=include_consolidated,
            )
        )
        reads_after |= _by_record(
            await kernel.temporal.query(
                record_id=record_id,
                as_of_ingestion=after,
                as_of_event=as_of_event,
                include_forgotten=include_forgotten,
                include_consolidated=include_consolidated,
            )
        )
    listing_now = _by_record(
        await kernel.temporal.query(
            limit=100,
            as_of_event=as_of_event,
            include_forgotten=include_forgotten,
            include_consolidated=include_consolidated,
        )
    )
    listing_after = _by_record(
        await kernel.temporal.query(
            limit=100,
            as_of_ingestion=after,
            as_of_event=as_of_event,
            include_forgotten=include_forgotten,
            include_consolidated=include_consolidated,
        )
    )
    assert reads_now == listing_now, flags
    assert listing_after == listing_now, flags
    assert reads_after == reads_now, flags
    names = {record_id: name for name, record_id in ids.items()}
    return {names[record_id]: answer for record_id, answer in listing_now.items()}


ACTIVE_1, ACTIVE_2 = (1, "active"), (2, "active")


async def test_without_an_event_instant_every_read_path_answers_what_the_kernel_believes(
    kernel: Kernel,
) -> None:
    """Record reads and listings (now and as of just after the last write) agree, validity
    ended or in the future alike, forgotten and consolidated records only when asked for."""
    ids = await _states(kernel)
    believed = {
        "plain": ACTIVE_1,
        "updated": ACTIVE_2,
        "ended": ACTIVE_1,
        "future": ACTIVE_1,
        "future_update": ACTIVE_2,
        "challenged": (2, "challenged"),
        "superseded": ACTIVE_2,
        "superseding": ACTIVE_1,
    }
    assert believed == await _agreed(kernel, ids, None)
    assert believed | {"forgotten": (1, "forgotten")} == await _agreed(
        kernel, ids, None, include_forgotten=True
    )
    assert believed | {"consolidated": (2, "consolidated")} == await _agreed(
        kernel, ids, None, include_consolidated=True
    )


async def test_with_as_of_event_now_every_read_path_answers_what_is_true_now(
    kernel: Kernel,
) -> None:
    """With as_of_event=now record reads and listings agree: ended, future and forgotten
    versions have no answer (even with include_forgotten), a future update yields to the
    version before it."""
    ids = await _states(kernel)
    now = utc_now()
    true_now = {
        "plain": ACTIVE_1,
        "updated": ACTIVE_2,
        "future_update": (1, "superseded"),  # v1's status was changed in place by v2
        "challenged": (2, "challenged"),
        "superseding": ACTIVE_1,
    }
    assert true_now == await _agreed(kernel, ids, now)
    assert true_now == await _agreed(kernel, ids, now, include_forgotten=True)
    assert true_now | {"consolidated": (2, "consolidated")} == await _agreed(
        kernel, ids, now, include_consolidated=True
    )
