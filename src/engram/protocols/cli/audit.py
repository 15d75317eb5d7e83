"""``engram audit``: verify the hash chain, seal checkpoints, export, replay, rebuild state."""

from __future__ import annotations

import contextlib
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any
from uuid import UUID

import typer

from engram.admin_kernel import AdminKernel
from engram.errors import InfrastructureError
from engram.memory.admin.redaction import redact_audit_row
from engram.memory.audit.checkpoint import Anchor, parse_anchor
from engram.protocols.cli.output import (
    EXIT_CHECK_FAILED,
    EXIT_CODES,
    EXIT_USAGE,
    fail,
    json_text,
    parse_instant,
    print_json,
    print_table,
    progress,
    short,
    when,
    with_admin,
    with_kernel,
)
from engram.protocols.cli.quarantine import (
    ByOption,
    ReasonOption,
    RevealOption,
    admin_identity,
    reveal_reason,
)

if TYPE_CHECKING:
    from engram.kernel import Kernel
    from engram.memory.admin.replay import ReplayedDecision, ReplayReport
    from engram.memory.audit.state import StateReport

#: The advisors a replay can use: :data:`engram.memory.admin.policy.ADVISORS`, repeated here so
#: the admin commands do not import the Gate to print their help (a unit test keeps them equal).
REPLAY_ADVISORS = ("heuristic", "rl")

app = typer.Typer(help="The hash-chained audit log of Gate decisions.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stdout holds only data).")]
SinceOption = Annotated[
    str | None, typer.Option(help="From this time, inclusive (ISO 8601; UTC if no zone).")
]
UntilOption = Annotated[str | None, typer.Option(help="Up to this time, exclusive (ISO 8601).")]
PAGE = 1000
#: An anchor file larger than this is read from its end only: an export's heads are its
#: last line, and the export of a large log runs to gigabytes.
ANCHOR_TAIL = 1 << 20


AnchorOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--anchor",
        help="A checkpoint kept outside the database (`audit checkpoint --json` output, or "
        "an `audit export` file); repeatable.",
        exists=True,
        dir_okay=False,
        readable=True,
    ),
]


def _anchor_text(path: Path) -> str:
    """An anchor file's text: whole when small, else its last whole lines (at most
    :data:`ANCHOR_TAIL` bytes), which end with an export's heads."""
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - ANCHOR_TAIL))
        data = file.read(ANCHOR_TAIL)
    if size > ANCHOR_TAIL:  # begin at a line: the first one read is cut
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data.decode("utf-8")


def _anchors(paths: list[Path] | None) -> list[Anchor]:
    anchors = []
    for path in paths or []:
        try:
            anchors.append(parse_anchor(_anchor_text(path), str(path)))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--anchor") from exc
    return anchors


@app.command("verify")
def verify(anchor: AnchorOption = None, as_json: JsonOption = False) -> None:
    """Recompute every hash and link and check the sealed checkpoints (and the anchors given);
    name the first thing that does not hold (exit 6)."""
    anchors = _anchors(anchor)

    async def work(kernel: AdminKernel) -> dict[str, Any]:
        total = await kernel.audit.count()
        with progress("verifying the audit chain", total) as advance:
            report = await kernel.audit.verify(progress=advance, anchors=anchors)
        return {
            "ok": report.ok,
            "rows_total": total,
            "rows_checked": report.rows_checked,
            "first_bad_seq": report.first_bad_seq,
            "first_bad_decision_id": (
                None if report.first_bad_decision_id is None else str(report.first_bad_decision_id)
            ),
            "problem": report.problem,
            "checkpoint": report.checkpoint,
            "checkpoints_checked": report.checkpoints_checked,
            "sealed_through_seq": report.sealed_through_seq,
            "legacy_rows": report.legacy_rows,
            "anchors_checked": report.anchors_checked,
        }

    result = with_admin(work)
    if as_json:
        print_json(result)
    elif result["ok"]:
        typer.echo(
            f"audit log intact: {result['rows_checked']} rows verified, "
            f"{result['checkpoints_checked']} checkpoints sealing seq 1 to "
            f"{result['sealed_through_seq']}, {result['anchors_checked']} anchors"
        )
    else:
        where = []
        if result["first_bad_seq"] is not None:
            where.append(f"row seq {result['first_bad_seq']}")
        if result["first_bad_decision_id"] is not None:
            where.append(f"(decision {result['first_bad_decision_id']})")
        if result["checkpoint"] is not None and result["first_bad_seq"] is None:
            where.append(f"checkpoint {result['checkpoint']}")
        at = f" at {' '.join(where)}" if where else ""
        typer.echo(f"audit log TAMPERED{at}: {result['problem']}")
    if not result["ok"]:
        raise fail("the audit log does not verify", EXIT_CHECK_FAILED)


@app.command("checkpoint")
def checkpoint(as_json: JsonOption = False) -> None:
    """Seal a checkpoint of the audit log now and print it; keep the JSON outside the
    database and give it back to `audit verify --anchor`."""

    async def work(kernel: AdminKernel) -> dict[str, Any] | None:
        sealed = await kernel.audit.seal()
        return None if sealed is None else sealed.to_json()

    sealed = with_admin(work)
    if as_json:
        print_json({"checkpoint": sealed})
    elif sealed is None:
        typer.echo("the audit log is empty: nothing to seal")
    else:
        typer.echo(
            f"checkpoint {sealed['id']} seals seq 1 to {sealed['through_seq']} "
            f"({sealed['rows_sealed']} rows since the previous one); hash "
            f"{sealed['checkpoint_hash']}"
        )


@app.command("export")
def export(  # noqa: PLR0917 - typer passes every option by keyword
    since: SinceOption = None,
    until: UntilOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file (mode 0600), not stdout."),
    ] = None,
    heads: Annotated[
        bool,
        typer.Option(
            "--heads/--no-heads", help="End with a line of a new checkpoint and the lane heads."
        ),
    ] = True,
    reveal: RevealOption = False,
    reason: ReasonOption = None,
    by: ByOption = None,
) -> None:
    """Write the rows of a window as JSONL (oldest first), then a checkpoint sealed now and
    the chain's lane heads (an anchor for `audit verify --anchor`). The content of rows about
    records the PII check flagged is left out (marked "redacted") unless --reveal."""
    start, end = parse_instant(since, "--since"), parse_instant(until, "--until")
    why = reveal_reason(reveal, reason)

    async def work(kernel: AdminKernel) -> int:
        total = await kernel.audit.count(since=start, until=end)
        flagged = await kernel.quarantine.flagged()
        # The file is opened only once the command is known to run (a refused one leaves an
        # existing file as it was), and before the reveal is audited (a file that cannot be
        # written shows nothing).
        sink = None if output is None else _private_file(output)
        try:
            if why is not None:
                await kernel.quarantine.reveal(
                    admin=admin_identity(by),
                    shown=f"audit export of {total} rows",
                    reason=why,
                    record_ids=sorted(flagged),
                )
            hide = None if why is not None else flagged
            written = await _export(kernel, sink, start, end, total, heads=heads, flagged=hide)
            if sink is not None:
                sink.close()  # its last write: a full disk may show only here
        except OSError as exc:
            if sink is None:  # stdout: as any command's
                raise
            raise fail(
                f"cannot write {output}: {exc.strerror}; the file is incomplete",
                EXIT_CODES[InfrastructureError],
            ) from exc
        finally:
            if sink is not None and not sink.closed:
                with contextlib.suppress(OSError):
                    sink.close()
        return written

    written = with_admin(work)
    if output is not None:
        typer.echo(f"engram: {written} rows written to {output}", err=True)


def _private_file(path: Path) -> IO[str]:
    """``path`` opened for writing, readable by its owner only (an export holds the log)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
        # An existing file keeps its mode otherwise; a device or a pipe is not ours to
        # narrow (as root, ``--output /dev/null`` took /dev/null from every other user).
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror}", EXIT_USAGE) from exc
    return os.fdopen(fd, "w", encoding="utf-8")


async def _export(
    kernel: AdminKernel,
    sink: IO[str] | None,
    since: datetime | None,
    until: datetime | None,
    total: int,
    *,
    heads: bool,
    flagged: set[UUID] | None,
) -> int:
    def emit(value: Any) -> None:
        if sink is None:
            print_json(value)
        else:
            sink.write(json_text(value) + "\n")

    written, after = 0, 0
    with progress("exporting", total) as advance_to:
        while True:
            page = await kernel.audit.search(after_seq=after, since=since, until=until, limit=PAGE)
            if not page:
                break
            for row in page:
                emit(row if flagged is None else redact_audit_row(row, flagged))
            written += len(page)
            after = int(page[-1]["seq"])
            advance_to(written)
    if heads:
        sealed = await kernel.audit.seal()
        emit(
            {
                "checkpoint": None if sealed is None else sealed.to_json(),
                "lane_heads": await kernel.audit.lane_heads(),
                "rows": written,
                "since": since,
                "until": until,
                "exported_at": datetime.now(UTC),
            }
        )
    return written


def _why(decision: ReplayedDecision) -> str:
    if decision.skipped is not None:
        return f"skipped: {decision.skipped}"
    return "; ".join(decision.reasons) or "same"


def _print_replay(report: ReplayReport, *, show_all: bool) -> None:
    rows = [
        [
            d.seq,
            when(d.occurred_at),
            d.action,
            d.agent_id,
            f"{d.recorded.decision}/{d.recorded.outcome}",
            "" if d.replayed is None else f"{d.replayed.decision}/{d.replayed.outcome}",
            _why(d),
        ]
        for d in report.decisions
        if show_all or d.changed
    ]
    columns = ["seq", "at", "action", "agent", "recorded", "replayed", "why"]
    if rows:
        print_table(f"replay with {report.advisor}", columns, rows)
    changed, skipped = len(report.changed), len(report.skipped)
    typer.echo(
        f"{len(report.decisions)} decisions examined, {changed} would change, "
        f"{skipped} not replayable (admin releases, unreadable input)"
    )


@app.command("replay")
def replay(  # noqa: PLR0917 - typer passes every option by keyword
    since: SinceOption = None,
    until: UntilOption = None,
    advisor: Annotated[
        str, typer.Option(help=f"Layer 2 advisor: {', '.join(REPLAY_ADVISORS)}.")
    ] = "heuristic",
    policy: Annotated[
        Path | None, typer.Option(help="Policy file (TOML, or JSON by its .json name).")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Show every decision, not only the changed ones.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(help="With --advisor rl: the trained model (default: the active one)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Re-evaluate the recorded requests under an advisor and policy; write nothing."""
    start, end = parse_instant(since, "--since"), parse_instant(until, "--until")

    if model is not None and advisor != "rl":
        raise typer.BadParameter("--model needs --advisor rl", param_hint="--model")

    from engram.memory.admin.replay import ReplayPolicy, load_policy  # noqa: PLC0415 - heavy

    async def work(kernel: Kernel) -> ReplayReport:
        chosen = ReplayPolicy() if policy is None else load_policy(policy)
        trained = None
        if advisor == "rl":
            row = (
                await kernel.advisor_models.active()
                if model is None
                else await kernel.advisor_models.get(model)
            )
            trained = None if row is None else row.load()
        total = await kernel.replay.count(since=start, until=end)
        with progress("replaying", total) as advance_to:
            return await kernel.replay.replay(
                since=start,
                until=end,
                advisor=advisor,
                policy=chosen,
                progress=advance_to,
                model=trained,
            )

    report = with_kernel(work)
    if as_json:
        print_json(report.to_json(include_unchanged=show_all))
    else:
        _print_replay(report, show_all=show_all)


@app.command("state")
def state(
    as_of: Annotated[
        str | None, typer.Option(help="The instant to rebuild (ISO 8601; default: now).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Rebuild the live records at an instant from the audit log and compare them with the
    store's as-of reads; exit 6 on any difference."""
    instant = parse_instant(as_of, "--as-of") or datetime.now(UTC)

    async def work(kernel: AdminKernel) -> StateReport:
        return await kernel.audit_state.compare(instant)

    report = with_admin(work)
    if as_json:
        print_json(report.to_json())
    else:
        typer.echo(
            f"at {instant.isoformat()}: {report.live_in_log} live records in the audit log, "
            f"{report.live_in_store} in the store"
        )
        if report.differences:
            rows = [
                [
                    d.record_id,
                    short(d.problem, 70),
                    "" if d.from_log is None else d.from_log.version_id,
                    "" if d.from_store is None else d.from_store.version_id,
                ]
                for d in report.differences
            ]
            print_table("differences", ["record", "problem", "log version", "store version"], rows)
    if not report.ok:
        raise fail(f"{len(report.differences)} difference(s)", EXIT_CHECK_FAILED)
