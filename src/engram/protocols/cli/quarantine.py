"""``engram quarantine``: records the PII check holds at ``sensitive``, and their release."""

from __future__ import annotations

import getpass
from typing import Annotated
from uuid import UUID

import typer

from engram.kernel import Kernel
from engram.memory.types import AccessLevel, CallerIdentity, MemoryRecord
from engram.protocols.cli.output import (
    parse_uuid,
    print_json,
    print_table,
    short,
    when,
    with_kernel,
)
from engram.protocols.views import record_view

app = typer.Typer(help="Quarantined records and their release.", no_args_is_help=True)


def admin_identity(by: str | None) -> CallerIdentity:
    """The identity a CLI decision is audited under: ``system:cli:<who>``."""
    return CallerIdentity.system(f"cli:{by or getpass.getuser()}")


@app.command("list")
def list_quarantined(
    limit: Annotated[int, typer.Option(help="Most records to show.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List quarantined records, oldest first."""

    async def work(kernel: Kernel) -> list[MemoryRecord]:
        return await kernel.quarantine.pending(limit=limit)

    records = with_kernel(work)
    if as_json:
        for record in records:
            print_json(record_view(record))
        return
    if not records:
        typer.echo("no quarantined records")
        return
    rows = [
        [
            r.record_id,
            r.version,
            r.type.value,
            r.namespace,
            ",".join(r.metadata.get("pii", {}).get("kinds", [])),
            when(r.ingestion_time),
            short(r.content, 50),
        ]
        for r in records
    ]
    columns = ["record id", "v", "type", "namespace", "finding", "since", "content"]
    print_table(None, columns, rows)


@app.command("release")
def release(
    record_id: Annotated[str, typer.Argument(help="Record id shown by `quarantine list`.")],
    reason: Annotated[str, typer.Option(help="Why the record may be read (audited).")],
    level: Annotated[
        AccessLevel, typer.Option(help="Access level to move the record to.")
    ] = AccessLevel.AGENT,
    by: Annotated[str | None, typer.Option(help="Who decides (default: the login name).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Lift a quarantine: the record moves to LEVEL, with one audit row naming you."""
    rid = parse_uuid(record_id, "ID")
    admin = admin_identity(by)

    async def work(kernel: Kernel) -> tuple[MemoryRecord, UUID]:
        return await kernel.quarantine.release(rid, admin=admin, reason=reason, level=level)

    record, decision_id = with_kernel(work)
    if as_json:
        print_json({"decision_id": str(decision_id), "record": record_view(record)})
        return
    typer.echo(
        f"record {record.record_id} released to {record.access_level.value} "
        f"by {admin.agent_id} (decision {decision_id})"
    )
