"""``engram memories``: read any record as an admin (no access filter, no read counted)."""

from __future__ import annotations

from typing import Annotated

import typer

from engram.admin_kernel import AdminKernel
from engram.errors import NotFound
from engram.memory.types import MemoryRecord
from engram.protocols.cli.output import (
    parse_instant,
    parse_uuid,
    print_json,
    print_table,
    short,
    when,
    with_admin,
)
from engram.protocols.views import record_view

app = typer.Typer(help="Read records as an admin.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stdout holds only data).")]


def _rows(records: list[MemoryRecord]) -> list[list[object]]:
    return [
        [
            r.version,
            r.id,
            r.status.value,
            r.access_level.value,
            when(r.ingestion_time),
            when(r.ingestion_time_end),
            when(r.event_time),
            short(r.content),
        ]
        for r in records
    ]


COLUMNS = ["v", "version id", "status", "access", "known from", "known until", "event", "content"]


@app.command("get")
def get(
    record_id: Annotated[str, typer.Argument(help="Record id.")],
    as_of_event: Annotated[
        str | None, typer.Option(help="What was true at this time (ISO 8601; UTC if no zone).")
    ] = None,
    as_of_ingestion: Annotated[
        str | None, typer.Option(help="What the kernel knew at this time (ISO 8601).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print the version of a record that answers the given instants (default: now)."""
    rid = parse_uuid(record_id, "ID")
    event = parse_instant(as_of_event, "--as-of-event")
    ingestion = parse_instant(as_of_ingestion, "--as-of-ingestion")

    async def work(kernel: AdminKernel) -> MemoryRecord:
        found = await kernel.admin_temporal.query(
            record_id=rid,
            as_of_event=event,
            as_of_ingestion=ingestion,
            include_forgotten=True,
            include_consolidated=True,
            caller=None,
        )
        if not found:
            raise NotFound(f"no record {rid} at the given instants")
        return found[0]

    record = with_admin(work)
    if as_json:
        print_json(record_view(record))
        return
    print_table(f"record {record.record_id}", COLUMNS, _rows([record]))
    typer.echo(record.content)


@app.command("history")
def history(
    record_id: Annotated[str, typer.Argument(help="Record id.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print every version of a record, oldest first."""
    rid = parse_uuid(record_id, "ID")

    async def work(kernel: AdminKernel) -> list[MemoryRecord]:
        chain = await kernel.admin_temporal.get_version_chain(rid, caller=None)
        if not chain:
            raise NotFound(f"no record {rid}")
        return chain

    chain = with_admin(work)
    if as_json:
        for record in chain:
            print_json(record_view(record))
        return
    print_table(f"record {rid}: {len(chain)} versions", COLUMNS, _rows(chain))
