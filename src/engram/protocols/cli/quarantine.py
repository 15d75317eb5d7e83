"""``engram quarantine``: records the PII check holds at ``sensitive``, and their release."""

from __future__ import annotations

import getpass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

import typer

from engram.admin_kernel import AdminKernel
from engram.errors import ValidationFailed
from engram.memory.admin.quarantine import MAX_REASON, QuarantinePage, parse_cursor
from engram.memory.admin.redaction import redact_record
from engram.memory.types import AccessLevel, CallerIdentity, MemoryRecord
from engram.protocols.cli.output import (
    parse_uuid,
    print_json,
    print_table,
    short,
    when,
    with_admin,
    with_kernel,
)
from engram.protocols.views import record_view

if TYPE_CHECKING:
    from engram.kernel import Kernel

app = typer.Typer(help="Quarantined records and their release.", no_args_is_help=True)


#: The longest name ``--by`` takes: every login name fits, and the audit log's unique index
#: on (agent, request id) holds ``system:cli:<name>`` (a name of thousands of characters
#: broke the INSERT, and the command said the database was failing).
MAX_BY = 128


def admin_identity(by: str | None) -> CallerIdentity:
    """The identity a CLI decision is audited under: ``system:cli:<who>``; a usage error for
    a ``--by`` longer than :data:`MAX_BY` or holding control characters."""
    who = by or getpass.getuser()
    if len(who) > MAX_BY or not who.isprintable():
        raise typer.BadParameter(
            f"1-{MAX_BY} printable characters, not {len(who)}", param_hint="--by"
        )
    return CallerIdentity.system(f"cli:{who}")


#: The levels a release may move a record to: every level below ``sensitive`` (offering
#: ``sensitive`` would only invite a refusal).
class ReleaseLevel(StrEnum):
    """:class:`AccessLevel` without ``sensitive`` (a unit test keeps the two in step)."""

    PUBLIC = AccessLevel.PUBLIC.value
    AGENT = AccessLevel.AGENT.value
    USER = AccessLevel.USER.value
    SYSTEM = AccessLevel.SYSTEM.value


RevealOption = Annotated[
    bool,
    typer.Option(
        "--reveal",
        help="Show the quarantined content (hidden by default); audited, with --reason.",
    ),
]
ReasonOption = Annotated[
    str | None, typer.Option(help="Why the content must be seen (required with --reveal).")
]
ByOption = Annotated[str | None, typer.Option(help="Who asks (default: the login name).")]


def reveal_reason(reveal: bool, reason: str | None) -> str | None:
    """The audited reason of a ``--reveal``; usage error when it is missing."""
    if not reveal:
        return None
    if reason is None or not reason.strip():
        raise typer.BadParameter("--reveal needs --reason (it is audited)", param_hint="--reason")
    if len(reason) > MAX_REASON:
        raise typer.BadParameter(f"at most {MAX_REASON} characters", param_hint="--reason")
    return reason


def list_cursor(value: str | None) -> int:
    """The seq a ``--cursor`` names (0 without one); a usage error for any other text, an
    ingestion time (the list's cursor before it paged by seq) included."""
    if value is None:
        return 0
    try:
        return parse_cursor(value)
    except ValidationFailed as exc:
        raise typer.BadParameter(
            exc.message.removeprefix("cursor: "), param_hint="--cursor"
        ) from exc


@app.command("list")
def list_quarantined(  # noqa: PLR0917 - typer passes every option by keyword
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Most records to show.")] = 100,
    cursor: Annotated[
        str | None,
        typer.Option(help="Start after this cursor (the one a page before named on stderr)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    reveal: RevealOption = False,
    reason: ReasonOption = None,
    by: ByOption = None,
) -> None:
    """List quarantined records in the order they were quarantined (content hidden unless
    --reveal); when more follow, stderr names the --cursor of the next page."""
    why = reveal_reason(reveal, reason)
    after = list_cursor(cursor)

    async def work(kernel: AdminKernel) -> QuarantinePage:
        page = await kernel.quarantine.pending(after=after, limit=limit)
        if why is not None and page.records:
            await kernel.quarantine.reveal(
                admin=admin_identity(by),
                shown="quarantine list",
                reason=why,
                record_ids=[r.record_id for r in page.records],
            )
        return page

    page = with_admin(work)
    records = page.records
    if page.next_cursor is not None:
        typer.echo(f"engram: more follow: --cursor {page.next_cursor}", err=True)
    if as_json:
        for record in records:
            view = record_view(record)
            print_json(view if reveal else redact_record(view))
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
            short(r.content, 50) if reveal else "(hidden: --reveal)",
        ]
        for r in records
    ]
    columns = ["record id", "v", "type", "namespace", "finding", "since", "content"]
    print_table(None, columns, rows)


@app.command("release")
def release(  # noqa: PLR0917 - typer passes every option by keyword
    record_id: Annotated[str, typer.Argument(help="Record id shown by `quarantine list`.")],
    reason: Annotated[str, typer.Option(help="Why the record may be read (audited).")],
    level: Annotated[
        ReleaseLevel, typer.Option(help="Access level to move the record to.")
    ] = ReleaseLevel.AGENT,
    by: Annotated[str | None, typer.Option(help="Who decides (default: the login name).")] = None,
    version: Annotated[
        int | None,
        typer.Option(
            min=1, help="The version you reviewed; refused (exit 4) if the record moved on."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Lift a quarantine: the record moves to LEVEL, with one audit row naming you."""
    rid = parse_uuid(record_id, "ID")
    admin = admin_identity(by)

    async def work(kernel: Kernel) -> tuple[MemoryRecord, UUID]:
        return await kernel.quarantine.release(
            rid,
            admin=admin,
            reason=reason,
            level=AccessLevel(level.value),
            expected_version=version,
        )

    record, decision_id = with_kernel(work)
    if as_json:
        print_json({"decision_id": str(decision_id), "record": record_view(record)})
        return
    typer.echo(
        f"record {record.record_id} released to {record.access_level.value} "
        f"by {admin.agent_id} (decision {decision_id})"
    )
