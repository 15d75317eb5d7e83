"""``engram memories``: read any record as an admin (no access filter, no read counted)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import typer

from engram.admin_kernel import AdminKernel
from engram.errors import NotFound
from engram.memory.admin.redaction import redact_record
from engram.memory.types import MemoryRecord
from engram.protocols.cli.output import (
    parse_instant,
    parse_uuid,
    print_json,
    print_table,
    printable,
    short,
    when,
    with_admin,
)
from engram.protocols.cli.quarantine import (
    ByOption,
    ReasonOption,
    RevealOption,
    admin_identity,
    reveal_reason,
)
from engram.protocols.views import record_view

app = typer.Typer(help="Read records as an admin.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stdout holds only data).")]


def _rows(records: list[MemoryRecord], *, hidden: bool) -> list[list[object]]:
    return [
        [
            r.version,
            r.id,
            r.status.value,
            r.access_level.value,
            when(r.ingestion_time),
            when(r.ingestion_time_end),
            when(r.event_time),
            HIDDEN if hidden else short(r.content),
        ]
        for r in records
    ]


async def _shown(
    kernel: AdminKernel, record_id: UUID, *, why: str | None, by: str | None, shown: str
) -> bool:
    """Whether the record's content may be printed: yes unless the PII check flagged it in
    some version; then only with ``--reveal``, audited before anything is printed."""
    if not await kernel.quarantine.is_flagged(record_id):
        return True
    if why is None:
        return False
    await kernel.quarantine.reveal(
        admin=admin_identity(by), shown=shown, reason=why, record_ids=[record_id]
    )
    return True


HIDDEN = "(hidden: PII finding; --reveal)"
COLUMNS = ["v", "version id", "status", "access", "known from", "known until", "event", "content"]


@app.command("get")
def get(  # noqa: PLR0917 - typer passes every option by keyword
    record_id: Annotated[str, typer.Argument(help="Record id.")],
    as_of_event: Annotated[
        str | None, typer.Option(help="What was true at this time (ISO 8601; UTC if no zone).")
    ] = None,
    as_of_ingestion: Annotated[
        str | None, typer.Option(help="What the kernel knew at this time (ISO 8601).")
    ] = None,
    as_json: JsonOption = False,
    reveal: RevealOption = False,
    reason: ReasonOption = None,
    by: ByOption = None,
) -> None:
    """Print the version of a record that answers the given instants (default: now); the
    content of a record the PII check flagged only with --reveal (audited)."""
    rid = parse_uuid(record_id, "ID")
    event = parse_instant(as_of_event, "--as-of-event")
    ingestion = parse_instant(as_of_ingestion, "--as-of-ingestion")
    why = reveal_reason(reveal, reason)

    async def work(kernel: AdminKernel) -> tuple[MemoryRecord, bool]:
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
        return found[0], await _shown(kernel, rid, why=why, by=by, shown="memories get")

    record, visible = with_admin(work)
    if as_json:
        view = record_view(record)
        print_json(view if visible else redact_record(view))
        return
    print_table(f"record {record.record_id}", COLUMNS, _rows([record], hidden=not visible))
    typer.echo(printable(record.content) if visible else HIDDEN)


@app.command("history")
def history(
    record_id: Annotated[str, typer.Argument(help="Record id.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    reveal: RevealOption = False,
    reason: ReasonOption = None,
    by: ByOption = None,
) -> None:
    """Print every version of a record, oldest first; the content of a record the PII check
    flagged only with --reveal (audited)."""
    rid = parse_uuid(record_id, "ID")
    why = reveal_reason(reveal, reason)

    async def work(kernel: AdminKernel) -> tuple[list[MemoryRecord], bool]:
        chain = await kernel.admin_temporal.get_version_chain(rid, caller=None)
        if not chain:
            raise NotFound(f"no record {rid}")
        return chain, await _shown(kernel, rid, why=why, by=by, shown="memories history")

    chain, visible = with_admin(work)
    if as_json:
        for record in chain:
            view = record_view(record)
            print_json(view if visible else redact_record(view))
        return
    title = f"record {rid}: {len(chain)} versions"
    print_table(title, COLUMNS, _rows(chain, hidden=not visible))
