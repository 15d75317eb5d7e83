"""What the admin commands share: opening a kernel, printing data, progress and errors.

Data goes to stdout (a table, or with ``--json`` one JSON document or one object per line);
messages, warnings and progress bars go to stderr, so a script can pipe stdout as it is.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from engram.admin_kernel import AdminKernel, open_admin_kernel
from engram.config import EngramSettings
from engram.errors import (
    BusinessError,
    ConfigurationError,
    EngramError,
    InfrastructureError,
    NotFound,
)
from engram.memory.storable import instant_problem
from engram.observability.logging import configure_logging
from engram.protocols.errors import lookup, problems_of
from engram.provision import NoDatabaseHere, has_database, run_migrations

if TYPE_CHECKING:
    from engram.kernel import Kernel

T = TypeVar("T")

#: Exit codes by error family, one table for the whole CLI (docs/cli.md); a subclass not
#: listed takes the code of its nearest listed ancestor (:func:`engram.protocols.errors.lookup`).
EXIT_CODES: dict[type[EngramError], int] = {
    ConfigurationError: 2,
    NotFound: 3,
    BusinessError: 4,
    InfrastructureError: 5,
    EngramError: 1,
}
#: Bad usage (unknown option, malformed time or id) or invalid configuration.
EXIT_USAGE = 2
#: What the command names does not exist (an unknown agent, record or escalation).
EXIT_NOT_FOUND = 3
#: A check found a problem (tampered audit log, state differing from the store).
EXIT_CHECK_FAILED = 6

# Off a terminal (a pipe, a file) tables are not cut to 80 columns.
stdout = Console(width=None if sys.stdout.isatty() else 200)
stderr = Console(stderr=True)


def exit_code(exc: EngramError) -> int:
    """The exit code of an error, from the CLI's one table (:data:`EXIT_CODES`)."""
    return lookup(EXIT_CODES, exc)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``engram: message`` on stderr and return the exit to raise."""
    typer.echo(f"engram: {message}", err=True)
    return typer.Exit(code)


def error_exit(exc: EngramError) -> typer.Exit:
    """Print an engram error on stderr and return the exit (with its code) to raise."""
    return fail(exc.message, exit_code(exc))


def load_settings() -> EngramSettings:
    """The settings from the environment; invalid ones end the command (exit 2)."""
    try:
        return EngramSettings()
    except ValidationError as exc:
        # Named by setting, never quoted: a database URL may hold a password.
        problems = "; ".join(problems_of(exc, whole="settings"))
        raise fail(f"invalid configuration: {problems}", EXIT_USAGE) from exc
    except ValueError as exc:
        raise fail(f"invalid configuration: {type(exc).__name__}", EXIT_USAGE) from exc


#: Set by ``engram --init``: this run may create a database where there is none.
_init = {"requested": False}


def request_init(requested: bool) -> None:
    """Record the root command's ``--init`` (one CLI run is one process)."""
    _init["requested"] = requested


def existing_settings(*, migrate: bool = True) -> EngramSettings:
    """The settings, for a command that works on an existing database: an embedded data dir
    holding none is refused (exit 2, saying where it looked) unless ``--init`` was given, in
    which case the database is created and migrated first (unless ``migrate`` is false: the
    command migrates it itself, to the revision it was asked for)."""
    settings = load_settings()
    if has_database(settings) or (_init["requested"] and not migrate):
        return settings
    if not _init["requested"]:
        raise error_exit(NoDatabaseHere.at(settings))
    configure_logging("warning", settings.log_format)
    try:
        asyncio.run(run_migrations(settings))
    except EngramError as exc:
        raise error_exit(exc) from exc
    typer.echo(f"engram: created a new database in {settings.data_dir}", err=True)
    return settings


def with_admin(work: Callable[[AdminKernel], Awaitable[T]]) -> T:
    """Run ``work`` with the admin desks over the configured database (no Gate, no model, no
    migrations, no jobs: :mod:`engram.admin_kernel`), and close them.

    Errors of engram end the command with a message and the documented exit code.
    """
    settings = existing_settings()
    configure_logging("warning", settings.log_format)

    async def run() -> T:
        async with open_admin_kernel(settings) as kernel:
            return await work(kernel)

    try:
        return asyncio.run(run())
    except EngramError as exc:
        raise error_exit(exc) from exc


def with_kernel(work: Callable[[Kernel], Awaitable[T]], *, model: bool = True) -> T:
    """Open a kernel on the configured database, run ``work`` with it, and close it.

    ``model=False`` opens it without the embedding model and without migrating (commands
    that need the jobs or the Gate's objects but embed nothing). Errors of engram end the
    command with a message and the documented exit code.
    """
    # The whole kernel costs about a second to import; the admin desks do not need it.
    from engram.kernel import open_kernel  # noqa: PLC0415

    settings = existing_settings()
    configure_logging("warning", settings.log_format)

    async def run() -> T:
        async with open_kernel(settings=settings, model=model) as kernel:
            return await work(kernel)

    try:
        return asyncio.run(run())
    except EngramError as exc:
        raise error_exit(exc) from exc


def parse_instant(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 instant; one without a zone is taken as UTC."""
    if value is None:
        return None
    try:
        instant = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 time", param_hint=option) from exc
    instant = instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
    problem = instant_problem(instant)
    if problem is not None:
        raise typer.BadParameter(f"{value!r}: {problem}", param_hint=option)
    return instant


def parse_uuid(value: str, what: str) -> UUID:
    """A UUID argument."""
    try:
        return UUID(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is not a UUID", param_hint=what) from exc


def _default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def json_text(value: Any) -> str:
    """One line of JSON (sorted keys; times in ISO 8601)."""
    return json.dumps(value, default=_default, sort_keys=True, ensure_ascii=False)


def print_json(value: Any) -> None:
    """One JSON document (or one line of JSONL) on stdout."""
    sys.stdout.write(json_text(value) + "\n")


#: What a terminal acts on instead of showing: C0 and C1 control characters but tab and
#: newline (escape sequences, a carriage return writing over the line), and the
#: bidirectional embeddings, overrides and isolates, which reorder the text after them.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` as a terminal must show it: each control character as its escape
    (``\\x1b``, ``\\r``, ``\\u202e``). Stored text comes from agents; printed raw, it
    would clear the operator's screen, retitle the window or hide what follows."""
    return _CONTROLS.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table on stdout. Each cell is text as it is, never Rich's markup (a stored ``[/b]``
    ended the command, a ``[red]`` was taken as a colour), with :func:`printable`'s escapes."""
    table = Table(title=None if title is None else Text(printable(title)), show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text("" if cell is None else printable(str(cell))) for cell in row))
    stdout.print(table)


def short(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def when(value: datetime | str | None) -> str:
    """A time for tables: seconds precision, UTC."""
    if value is None:
        return ""
    instant = datetime.fromisoformat(value) if isinstance(value, str) else value
    if instant.tzinfo is None:  # the database's +/-infinity, read back without a zone
        instant = instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (only on a terminal); yields ``advance_to(done)``."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        redirect_stdout=False,  # data written meanwhile must stay on stdout
        redirect_stderr=False,
        disable=not stderr.is_terminal,
    )
    with bar:
        task = bar.add_task(description, total=total)

        def advance_to(done: int) -> None:
            bar.update(task, completed=done)

        yield advance_to
