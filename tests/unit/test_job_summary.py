"""What ``engram jobs list`` shows of a run, how a pass counts its failed batches, and how the
consolidation jobs back a failing level off."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

from engram.autonomy.jobs import summary
from engram.autonomy.levels import LevelBackoff
from engram.memory.consolidation.model import BatchReport, ConsolidationReport, SkipReason
from engram.memory.types import AccessLevel, ConsolidationTrigger


def test_a_summary_shows_counts_kept_in_a_nested_mapping() -> None:
    """`jobs list` shows the skipped counts too (a partly failed pass said only batches=3)."""
    line = summary("succeeded", {"batches": 3, "skipped": {"failed": 4, "timed_out": 1}})
    assert line == "batches=3, skipped.failed=4, skipped.timed_out=1"
    levels = summary("succeeded", {"levels": ["public", "sensitive"], "batches": 0})
    assert levels == "levels=public/sensitive, batches=0"
    assert summary("succeeded", {"levels": [], "batches": 0}) == "levels=-, batches=0"


def test_an_error_is_the_whole_summary_and_an_empty_detail_shows_the_outcome() -> None:
    """A failed run's summary is its error; a run with no detail shows its outcome."""
    assert summary("failed", {"batches": 1, "error": "InfrastructureError: down"}) == (
        "InfrastructureError: down"
    )
    assert summary("succeeded", {}) == "succeeded"


def _batch(
    *, committed: bool, skipped: dict[str, int], level: AccessLevel | None = None
) -> BatchReport:
    trigger = ConsolidationTrigger.SCHEDULED_DEEP
    return BatchReport(uuid.uuid4(), (), skipped, committed=committed, trigger=trigger, level=level)


def _report(
    batches: tuple[BatchReport, ...], levels: tuple[AccessLevel, ...] = ()
) -> ConsolidationReport:
    failed = sum(b.skipped.get(SkipReason.FAILED.value, 0) for b in batches)
    return ConsolidationReport(
        run_id=uuid.uuid4(),
        trigger=ConsolidationTrigger.SCHEDULED_DEEP,
        dry_run=False,
        candidates=9,
        batches=batches,
        skipped={SkipReason.FAILED.value: failed},
        duration_seconds=0.1,
        levels=levels,
    )


def test_a_pass_counts_the_batches_whose_transaction_failed_and_nothing_else() -> None:
    """Timed-out batches and committed ones are not failures."""
    failed = SkipReason.FAILED.value
    batches = (
        _batch(committed=True, skipped={}),
        _batch(committed=False, skipped={failed: 5}),
        _batch(committed=False, skipped={SkipReason.TIMED_OUT.value: 2}),
        _batch(committed=False, skipped={failed: 1}),
    )
    assert _report(batches).failed_batches == 2


def test_a_level_failed_when_one_of_its_batches_failed() -> None:
    """The event job keeps a failed level's mark where it was, so the level runs again; a
    level whose batches committed or timed out did not fail."""
    failed = SkipReason.FAILED.value
    batches = (
        _batch(committed=True, skipped={}, level=AccessLevel.PUBLIC),
        _batch(committed=False, skipped={failed: 3}, level=AccessLevel.AGENT),
        _batch(committed=True, skipped={}, level=AccessLevel.AGENT),
        _batch(committed=False, skipped={SkipReason.TIMED_OUT.value: 2}, level=AccessLevel.USER),
    )
    report = _report(batches, (AccessLevel.PUBLIC, AccessLevel.AGENT, AccessLevel.USER))
    assert report.failed_levels == (AccessLevel.AGENT,)


def test_a_failing_level_is_backed_off_alone_longer_each_time_until_it_commits() -> None:
    """The event and pressure jobs' back-off per level (ADR-019): the base after a pass whose
    batches of a level failed, doubling up to the ceiling; a pass with no batch of the level
    that committed or failed (out of time, nothing to do) keeps it; one that committed a
    batch of it ends it, and the next failure starts from the base again. Another level of
    the same passes is never held back."""
    agent, sensitive = AccessLevel.AGENT, AccessLevel.SENSITIVE
    levels = (agent, sensitive)
    failed = SkipReason.FAILED.value
    failing = _report(
        (
            _batch(committed=True, skipped={}, level=agent),
            _batch(committed=False, skipped={failed: 3}, level=sensitive),
        ),
        levels,
    )
    held = LevelBackoff(base=timedelta(minutes=1), ceiling=timedelta(minutes=3))
    now = datetime(2026, 11, 29, 3, tzinfo=UTC)
    waits = []
    for _ in range(4):
        held.note(failing, now)
        waits.append(held.until[sensitive] - now)
        assert (agent,) == held.awake(levels, now)
        assert levels == held.awake(levels, held.until[sensitive])
    assert [timedelta(minutes=n) for n in (1, 2, 3, 3)] == waits
    held.note(_report((), levels), now)
    assert (agent,) == held.awake(levels, now)
    held.note(_report((_batch(committed=True, skipped={}, level=sensitive),), levels), now)
    assert (levels, {}) == (held.awake(levels, now), held.failures)
    held.note(failing, now)
    assert timedelta(minutes=1) == held.until[sensitive] - now


def test_a_level_whose_planning_failed_is_a_failed_level_unless_a_batch_of_it_committed() -> None:
    """ADR-019, amendment of 2026-11-29, third: a level in ``unplanned_levels`` is failed (its
    mark stays, it is backed off) with no batch at all; one that committed a batch before its
    planning failed resumes, as a level whose batches partly failed does."""
    agent, user = AccessLevel.AGENT, AccessLevel.USER
    base = _report((_batch(committed=True, skipped={}, level=user),), (agent, user))
    report = dataclasses.replace(base, unplanned_levels=(agent, user))
    assert (agent, user) == report.failed_levels
    assert (agent, user) == report.unfinished_levels
    held = LevelBackoff(base=timedelta(minutes=1), ceiling=timedelta(minutes=3))
    now = datetime(2026, 11, 29, 3, tzinfo=UTC)
    held.note(report, now)
    assert ((user,), {agent: 1}) == (held.awake((agent, user), now), held.failures)
