"""The ``engram`` command line: serve, migrate, prepare the model."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import sys
from typing import Annotated, Any

import typer

from engram import __version__
from engram.admin_kernel import AdminKernel
from engram.errors import EngramError, InfrastructureError
from engram.observability.logging import configure_logging
from engram.protocols.cli import (
    advisor,
    agents,
    audit,
    consolidation,
    jobs,
    memories,
    quarantine,
)
from engram.protocols.cli.output import (
    EXIT_CODES,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    error_exit,
    existing_settings,
    fail,
    json_text,
    load_settings,
    printable,
    request_init,
    with_admin,
)
from engram.protocols.cli.quarantine import MAX_BY
from engram.provision import prepare_model, run_migrations

#: Escalation ids are a 64-bit sequence: a larger number names none.
MAX_ESCALATION_ID = 2**63 - 1

app = typer.Typer(
    name="engram",
    help="engram, a governed memory kernel for AI agents.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit


@app.callback()
def root(
    init: Annotated[
        bool,
        typer.Option(
            "--init",
            help="Let this command create the embedded data dir (ENGRAM_DATA_DIR) when it "
            "holds no database yet; without it only `engram serve` creates one.",
        ),
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    """engram, a governed memory kernel for AI agents."""
    del show_version  # handled eagerly by its callback
    request_init(init)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (ENGRAM_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (ENGRAM_PORT).")] = None,
) -> None:
    """Run the kernel and its HTTP server until Ctrl-C."""
    import uvicorn  # noqa: PLC0415 - only this command needs the server

    from engram.protocols.http.app import create_app  # noqa: PLC0415
    from engram.protocols.http.deadline import request_deadline  # noqa: PLC0415

    settings = load_settings()
    overrides = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    if overrides:
        settings = settings.model_copy(update=overrides)
    configure_logging(settings.log_level, settings.log_format)
    where = "embedded PostgreSQL in " + str(settings.data_dir) if settings.embedded else "external"
    typer.echo(
        f"engram {__version__}: starting on http://{settings.host}:{settings.port} ({where})"
    )
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # Every request must arrive whole in time: a slow client cannot hold a socket forever.
        http=request_deadline(settings.http_request_timeout_seconds),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=3,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    bind = BindFailure()
    logging.getLogger("uvicorn.error").addFilter(bind)
    # uvicorn handles SIGTERM as Ctrl-C, then raises it again with the handler found before
    # it ran: with the default one the process would die of it (exit 143) once shut down.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        server.run()
    except (KeyboardInterrupt, Terminated):
        # uvicorn re-raises the signal after its graceful shutdown has finished: a clean stop.
        typer.echo("engram: stopped")
    except EngramError as exc:
        raise error_exit(exc) from exc
    except SystemExit as exc:
        # uvicorn exits (3) when the lifespan or the bind failed, having logged why.
        if server.started:
            raise
        raise _start_failure(app, bind, settings.host, settings.port) from exc
    if not server.started:
        raise _start_failure(app, bind, settings.host, settings.port)


class Terminated(BaseException):
    """SIGTERM, raised where it arrives (as SIGINT raises KeyboardInterrupt)."""


def _terminated(signum: int, frame: object) -> None:
    del signum, frame
    raise Terminated


class BindFailure(logging.Filter):
    """Keeps the error uvicorn logs when it cannot listen (it logs the OSError itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.error: OSError | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, OSError):
            self.error = record.msg
        return True


def _start_failure(app: Any, bind: BindFailure, host: str, port: int) -> typer.Exit:
    """The one line, and the exit, of a server that did not start."""
    error = getattr(app.state, "startup_error", None)
    if isinstance(error, EngramError):
        return error_exit(error)
    if bind.error is not None:
        reason = str(bind.error.strerror or bind.error).rsplit(": ", 1)[-1]
        return fail(f"cannot listen on {host}:{port}: {reason}")
    return fail("the server did not start (the log above says why)")


@app.command()
def mcp() -> None:
    """Serve MCP over stdin/stdout for the agent whose token is in ENGRAM_AGENT_TOKEN."""
    from engram.protocols.mcp.stdio import run_stdio  # noqa: PLC0415 - only this command

    settings = existing_settings()
    configure_logging(settings.log_level, settings.log_format)  # stderr: stdout is the protocol
    try:
        run_stdio(settings)
    except EngramError as exc:
        raise error_exit(exc) from exc
    except KeyboardInterrupt:
        pass


@app.command()
def migrate(
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Apply migrations (embedded: as the bootstrap superuser; external: the migration URL)."""
    settings = existing_settings(migrate=False)  # with --init: to the revision asked for
    configure_logging(settings.log_level, settings.log_format)
    try:
        reached = asyncio.run(run_migrations(settings, revision))
    except EngramError as exc:
        raise error_exit(exc) from exc
    typer.echo(f"schema at revision {reached}")


@app.command("prepare-model")
def prepare_model_command() -> None:
    """Assemble the offline embedding model directory (no-op when it is complete)."""
    settings = load_settings()
    try:
        copied, where = prepare_model(settings)
    except EngramError as exc:
        raise error_exit(exc) from exc
    typer.echo(f"embedding model {'assembled' if copied else 'ready'} in {where}")


conflicts = typer.Typer(help="The admin queue of conflicts a person must decide.")
app.add_typer(conflicts, name="conflicts")
app.add_typer(agents.app, name="agents")
app.add_typer(memories.app, name="memories")
app.add_typer(audit.app, name="audit")
app.add_typer(quarantine.app, name="quarantine")
app.add_typer(consolidation.app, name="consolidation")
app.command("consolidate")(consolidation.consolidate)
app.add_typer(jobs.app, name="jobs")
app.add_typer(advisor.app, name="advisor")
app.command("worker")(jobs.worker)


@conflicts.command("list")
def conflicts_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Most entries to show.")] = 100,
) -> None:
    """List open escalations, oldest first."""

    async def pending(kernel: AdminKernel) -> list[dict[str, Any]]:
        return [dict(row) for row in await kernel.admin_queue.pending(limit=limit)]

    rows = with_admin(pending)
    for row in rows:
        if as_json:
            typer.echo(json_text(row))
        else:
            payload = row["payload"]
            typer.echo(
                f"{row['id']:>6}  {row['created_at']:%Y-%m-%d %H:%M}  {row['kind']}  "
                f"record {row['record_id']} vs {payload.get('existing_record_id')}: "
                f"{printable(str(payload.get('reason', '')))}"
            )
    if not rows and not as_json:
        typer.echo("no open escalations")


@conflicts.command("ack")
def conflicts_ack(
    escalation_id: Annotated[int, typer.Argument(help="Id shown by `engram conflicts list`.")],
    by: Annotated[str, typer.Option(help="Who decided.")] = "admin",
) -> None:
    """Close one escalation once a person has decided it."""
    if not 1 <= escalation_id <= MAX_ESCALATION_ID:
        raise typer.BadParameter(
            f"{escalation_id} is not an escalation id", param_hint="ESCALATION_ID"
        )
    if not by or len(by) > MAX_BY or not by.isprintable():  # as every other --by
        raise typer.BadParameter(
            f"1-{MAX_BY} printable characters, not {len(by)}", param_hint="--by"
        )

    async def acknowledge(kernel: AdminKernel) -> bool:
        return await kernel.admin_queue.acknowledge(escalation_id, by=by)

    if not with_admin(acknowledge):
        raise fail(f"no open escalation {escalation_id}", EXIT_NOT_FOUND)
    typer.echo(f"escalation {escalation_id} closed")


def _undecodable_argument() -> str | None:
    """Why an argument cannot be used, or None. Python hands argv bytes that are not UTF-8
    over as lone surrogates, which no database column, audit hash or JSON line can hold."""
    for position, argument in enumerate(sys.argv[1:], start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(argument)[:60]
            return f"argument {position} ({shown!r}) is not valid UTF-8"
    return None


def main() -> None:
    """Console-script entry point."""
    if (problem := _undecodable_argument()) is not None:
        typer.echo(f"engram: {problem}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        sys.exit(130)
    except OSError as exc:
        if exc.errno not in _UNWRITABLE:
            raise
        _unwritable(exc)


#: Why a write to a file that exists fails: a full disk or quota, a file size limit, I/O.
_UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _unwritable(exc: OSError) -> None:
    """The command's output could not be written (standard output on a full disk): said on
    stderr, exit 5, never a traceback; what Python would flush at exit goes nowhere."""
    with contextlib.suppress(OSError):
        typer.echo(f"engram: cannot write its output: {exc.strerror}", err=True)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_CODES[InfrastructureError])
