"""Reading the embedded server's log for a PANIC written after a mark (real files).

A migration on a full disk failed with "connection was closed in the middle of operation"
when the write-ahead log ran out first: the server PANICs and ends every session, and the one
line an operator read gave no reason (seen once in a CI run under load). `engram migrate`
now names the PANIC the server logged while it ran."""

from __future__ import annotations

from pathlib import Path

from engram.infra import server_log

_BEFORE = (
    "2026-11-29 23:31:18.102 UTC [24500] LOG:  database system is ready to accept connections\n"
    "2026-11-29 23:31:18.300 UTC [24511] PANIC:  an old panic, before the mark\n"
)
_AFTER = (
    "2026-11-29 23:31:19.004 UTC [24502] LOG:  checkpoint starting: immediate force wait\n"
    '2026-11-29 23:31:19.410 UTC [24505] PANIC:  could not write to file "pg_wal/xlogtemp.24505"'
    ": No space left on device\n"
    "2026-11-29 23:31:19.412 UTC [24500] LOG:  WAL writer process (PID 24505) was terminated\n"
)


def test_the_last_panic_after_the_mark_is_named(tmp_path: Path) -> None:
    """A PANIC before the mark is not this operation's; the one after it is, prefix cut."""
    log = server_log.log_path(tmp_path)
    log.write_text(_BEFORE)
    mark = server_log.mark(tmp_path)
    assert mark == len(_BEFORE.encode())
    assert server_log.panic_since(tmp_path, mark) is None
    with log.open("a") as out:
        out.write(_AFTER)
    assert server_log.panic_since(tmp_path, mark) == (
        'PANIC: could not write to file "pg_wal/xlogtemp.24505": No space left on device'
    )


def test_no_log_or_no_panic_names_nothing(tmp_path: Path) -> None:
    """No log yet, or one with errors but no PANIC: nothing to add to the failure."""
    assert server_log.mark(tmp_path) == 0
    assert server_log.panic_since(tmp_path, 0) is None
    server_log.log_path(tmp_path).write_text(_AFTER.replace("PANIC", "ERROR"))
    assert server_log.panic_since(tmp_path, 0) is None


def test_a_log_cut_below_the_mark_is_read_from_its_start(tmp_path: Path) -> None:
    """A log shorter than the mark (replaced since) is read from its start."""
    server_log.log_path(tmp_path).write_text(_AFTER)
    assert server_log.panic_since(tmp_path, 10**9) is not None


def test_only_the_tail_of_a_long_log_is_read(tmp_path: Path) -> None:
    """A mark far back in a long log reads its last TAIL_BYTES only, where a PANIC is."""
    filler = "2026-11-29 23:31:18.000 UTC [1] LOG:  x\n" * 10_000
    server_log.log_path(tmp_path).write_text(_BEFORE + filler + _AFTER)
    assert "No space left on device" in (server_log.panic_since(tmp_path, 0) or "")
    server_log.log_path(tmp_path).write_text(_BEFORE + filler)
    assert server_log.panic_since(tmp_path, 0) is None


def test_a_line_that_only_quotes_the_word_is_no_panic(tmp_path: Path) -> None:
    """An ERROR, DETAIL or STATEMENT line quoting "PANIC:" (a row's values, a statement's
    text) is not the server's PANIC: only the severity after the line's prefix counts."""
    quoted = (
        "2026-11-29 23:31:19.500 UTC [24507] ERROR:  duplicate key: (content)=(see [1] PANIC: x)\n"
        "2026-11-29 23:31:19.501 UTC [24507] STATEMENT:  SELECT 'PANIC: not one'\n"
    )
    server_log.log_path(tmp_path).write_text(quoted)
    assert server_log.panic_since(tmp_path, 0) is None
    server_log.log_path(tmp_path).write_text(_AFTER + quoted)
    assert "No space left on device" in (server_log.panic_since(tmp_path, 0) or "")
