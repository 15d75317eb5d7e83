"""``engram consolidate`` and ``engram consolidation list|show|rollback`` (ADR-018)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, Any

import structlog
import typer

from engram.memory.types import ConsolidationTrigger
from engram.protocols.cli.output import (
    parse_uuid,
    print_json,
    print_table,
    progress,
    when,
    with_kernel,
)

if TYPE_CHECKING:
    from engram.kernel import Kernel
    from engram.memory.consolidation import (
        BatchReport,
        ConsolidationReport,
        RollbackReport,
        SweepReport,
    )

log = structlog.get_logger("engram.cli")
app = typer.Typer(help="Consolidation batches: list, show, roll back.", no_args_is_help=True)


def consolidate(
    trigger: Annotated[
        ConsolidationTrigger, typer.Option(help="Which pass to run.")
    ] = ConsolidationTrigger.SCHEDULED_DEEP,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be consolidated; write nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run (or preview) one consolidation pass now."""

    async def work(kernel: Kernel) -> tuple[ConsolidationReport, SweepReport | None]:
        from engram.autonomy.catalogue import CONSOLIDATION_LOCK  # noqa: PLC0415 - kernel opened
        from engram.memory.consolidation import SweepReport  # noqa: PLC0415

        with progress(f"consolidating ({trigger.value})", None) as advance_to:

            def seen(done: int, total: int) -> None:
                advance_to(done)

            def run() -> Awaitable[ConsolidationReport]:
                return kernel.consolidation.run(trigger, dry_run=dry_run, progress=seen)

            async def swept_then_run() -> tuple[ConsolidationReport, SweepReport]:
                # As the scheduled passes do: first the releases their events did not finish
                # (ADR-018), so the pass does not plan over a source an agent took back; a
                # sweep that fails counts as one failed release and the pass runs.
                try:
                    swept = await kernel.consolidation.sweep_releases()
                except Exception as exc:  # noqa: BLE001 - the pass runs whatever the sweep met
                    log.error("consolidation.release_sweep_failed", error=type(exc).__name__)
                    swept = SweepReport(found=1, released=0, failed=1)
                return await run(), swept

            if dry_run:  # writes nothing: it may run beside a pass
                return await run(), None
            try:  # the consolidation jobs' lock: no scheduled pass runs beside this one
                return await kernel.scheduler.run_alone(CONSOLIDATION_LOCK, swept_then_run)
            finally:
                await kernel.scheduler.stop()

    report, swept = with_kernel(work)
    if as_json:
        releases = (
            {}
            if swept is None
            else {"releases_swept": swept.released, "releases_failed": swept.failed}
        )
        print_json({**report.to_json(), **releases})
        return
    if swept is not None and swept.found:
        typer.echo(
            f"finished {swept.released} release(s) of forgotten or changed sources"
            + (f", {swept.failed} failed (see the log)" if swept.failed else "")
        )
    verb = "would consolidate" if dry_run else "consolidated"
    count = sum(len(c.sources) for c in report.planned) if dry_run else len(report.consumed)
    made = len(report.planned) if dry_run else len(report.created)
    typer.echo(
        f"{verb} {count} of {report.candidates} fast-path records into {made} records "
        f"in {len(report.batches)} batch(es), {report.duration_seconds:.1f} s"
    )
    if report.skipped:
        left = ", ".join(f"{reason} {n}" for reason, n in sorted(report.skipped.items()))
        typer.echo(f"left as they were: {left}")
    if dry_run:
        rows = [
            [c.action.value, c.proposal_type.value, len(c.sources), c.source_words, c.words]
            for c in report.planned
        ]
        print_table(None, ["action", "type", "sources", "source words", "words"], rows)
    else:
        _batches_table(list(report.batches))


def _batches_table(batches: list[BatchReport]) -> None:
    rows = [
        [
            b.batch_id,
            b.trigger.value if b.trigger else "",
            when(b.created_at) if b.created_at else "",
            len(b.created),
            len(b.consumed),
            when(b.rolled_back_at) if b.rolled_back_at else "",
        ]
        for b in batches
        if b.committed
    ]
    print_table(None, ["batch", "trigger", "at", "created", "consumed", "rolled back"], rows)


@app.command("list")
def list_batches(
    limit: Annotated[int, typer.Option(help="Most batches to show.", min=1, max=10_000)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """The most recent consolidation batches, newest first."""

    async def work(kernel: Kernel) -> list[BatchReport]:
        return await kernel.consolidation.batches(limit=limit)

    batches = with_kernel(work, model=False)
    if as_json:
        for batch in batches:
            print_json(batch.to_json())
        return
    if not batches:
        typer.echo("no consolidation batches")
        return
    _batches_table(batches)


@app.command("show")
def show(
    batch_id: Annotated[str, typer.Argument(help="Batch id shown by `consolidation list`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """One batch: each consolidated record and the sources it consumed."""
    bid = parse_uuid(batch_id, "BATCH")

    async def work(kernel: Kernel) -> BatchReport:
        return await kernel.consolidation.batch(bid)

    batch = with_kernel(work, model=False)
    if as_json:
        print_json(batch.to_json())
        return
    rows: list[list[Any]] = [
        [item.action.value, item.record_id, len(item.sources), " ".join(map(str, item.sources))]
        for item in batch.items
    ]
    print_table(f"batch {batch.batch_id}", ["action", "record", "sources", "source ids"], rows)


@app.command("rollback")
def rollback(
    batch_id: Annotated[str, typer.Argument(help="Batch id shown by `consolidation list`.")],
    force: Annotated[
        bool, typer.Option("--force", help="Also forget records an agent changed since.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Forget the batch's consolidated records and restore its sources (audited)."""
    bid = parse_uuid(batch_id, "BATCH")

    async def work(kernel: Kernel) -> RollbackReport:
        return await kernel.consolidation.rollback(bid, force=force)

    report = with_kernel(work)
    if as_json:
        print_json(report.to_json())
        return
    typer.echo(
        f"batch {report.batch_id} rolled back: {len(report.retired)} record(s) retired, "
        f"{len(report.restored)} source(s) restored, {len(report.untouched)} left as they were"
    )
