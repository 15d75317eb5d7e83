"""Hostile pass AB: what the admin CLI prints of stored text, as an operator runs it."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import stat
import subprocess
from pathlib import Path

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import TrustLevel
from tests.e2e.test_cli_admin import _cli
from tests.integration.gate_helpers import belief, create

WRITER = caller_for_tier("markup-writer", TrustLevel.RESTRICTED, writes_per_minute=1000)
#: An agent's record: a stray closing tag of Rich's markup, a terminal's clear-screen and
#: set-title sequences, a carriage return that writes over the line, a right-to-left override.
CONTENT = (
    "Config lint rejects a stray [/bold] tag and [red]colour[/red] names; "
    "\x1b[2J\x1b]0;owned\x07 cleared\rX and \u202eevil."
)


async def test_stored_text_is_printed_as_text_never_as_markup_or_terminal_codes(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """A record whose content held ``[/bold]`` made ``engram memories get`` and ``history``
    end with a MarkupError traceback (Rich read the content as its markup), ``[red]`` was
    taken as a colour and left out of what the operator saw, and the escape sequences an
    agent wrote reached the operator's terminal: a clear screen, a new window title, a line
    written over. Both commands now print the text as stored, every control character shown
    as its escape."""
    data_dir = tmp_path / "data"
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        made = await kernel.gate.evaluate(
            create(belief(CONTENT, source_agent=WRITER.agent_id), WRITER)
        )
    assert made.record_id is not None, made.reason

    for command in ("get", "history"):
        done = _cli(data_dir, model_dir, "memories", command, str(made.record_id))
        assert 0 == done.returncode, done.stderr
        assert "Traceback" not in done.stderr
        shown = " ".join(done.stdout.split())
        assert "[/bold]" in shown, shown
        for code in ("\x1b", "\x07", "\r", "\u202e"):
            assert code not in done.stdout, (command, code)
    # ``get`` prints the whole content after its table (``history`` cuts it to 60 characters)
    assert "[red]colour[/red]" in done_get(data_dir, model_dir, made.record_id)


def done_get(data_dir: Path, model_dir: Path, record_id: object) -> str:
    """The whole content ``memories get`` prints after its table, on one line."""
    done = _cli(data_dir, model_dir, "memories", "get", str(record_id))
    assert 0 == done.returncode, done.stderr
    last = done.stdout.splitlines()[-1]
    assert "\\x1b[2J\\x1b]0;owned\\x07 cleared\\rX and \\u202eevil." in last, last
    return last


def _limited_cli(
    data_dir: Path, model_dir: Path, file_bytes: int, *args: str, stdout: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI, unable to write a file past ``file_bytes`` (a full disk, as far as it can
    tell: a write past the limit fails with EFBIG; the server it attaches to is unbounded),
    its standard output going to ``stdout`` when given."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    return _cli(data_dir, model_dir, *args, limit=limit, stdout=stdout)


async def test_an_export_leaves_a_device_or_pipe_as_it_was_and_says_when_it_cannot_write(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """``audit export --output`` made any file it opened mode 0600, a device or a pipe too:
    run as root with ``--output /dev/null``, it took /dev/null from every other user of the
    machine. Only a regular file is narrowed now. An export whose file could not be
    written (a full disk) ended with an OSError traceback; it now exits 5 naming the file
    and the reason, and says the file is incomplete. So did any command whose standard
    output could not be written; it now exits 5 saying so."""
    data_dir = tmp_path / "data"
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for n in range(40):
            text = f"Locker {n} on the second floor holds the spare projector cables."
            await kernel.gate.evaluate(create(belief(text, source_agent=WRITER.agent_id), WRITER))

        pipe = tmp_path / "export.pipe"
        os.mkfifo(pipe, 0o644)
        received, done = await asyncio.gather(
            asyncio.to_thread(pipe.read_bytes),  # until the export closes its end
            asyncio.to_thread(_cli, data_dir, model_dir, "audit", "export", "-o", str(pipe)),
        )
        assert 0 == done.returncode, done.stderr
        assert 0o644 == stat.S_IMODE(pipe.stat().st_mode)
        lines = received.splitlines()
        assert len(lines) - 1 == json.loads(lines[-1])["rows"] >= 40  # the rows, the heads

        target = tmp_path / "export.jsonl"
        full = await asyncio.to_thread(
            _limited_cli, data_dir, model_dir, 4096, "audit", "export", "-o", str(target)
        )
        redirected = await asyncio.to_thread(
            _limited_cli, data_dir, model_dir, 4096, "audit", "export", stdout=tmp_path / "out"
        )
    # ``engram audit export > file`` on a full disk: any command's output, not only export's
    assert 5 == redirected.returncode, redirected
    assert "Traceback" not in redirected.stderr, redirected.stderr
    assert "engram: cannot write its output: File too large" in redirected.stderr
    assert 5 == full.returncode, full
    assert "Traceback" not in full.stderr, full.stderr
    assert f"engram: cannot write {target}" in full.stderr, full.stderr
    assert "incomplete" in full.stderr, full.stderr
