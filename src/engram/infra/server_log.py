"""What the embedded server's own log says about a failure its client could not name.

When PostgreSQL PANICs (the write-ahead log cannot be written on a full disk, above all), the
server ends every session, and a client whose session was not the one that failed reads only
that its connection closed. The reason is in the server's log (``<pgdata>/log``, where the
package's ``pg_ctl -l`` writes it): :func:`mark` notes where the log ends before an operation,
:func:`panic_since` finds the last PANIC written after that mark.
"""

from __future__ import annotations

import re
from pathlib import Path

#: The most of the log read after a mark: a PANIC is among the last lines a server writes.
TAIL_BYTES = 64 * 1024
#: What starts the message of a PANIC line, after the line's prefix (time, pid).
PANIC = "PANIC:"
_SEVERITY = re.compile(r"^[^\[\]]*\[\d+\]\s+PANIC:\s")


def log_path(pgdata: Path) -> Path:
    """The server log of the cluster in ``pgdata``."""
    return pgdata / "log"


def mark(pgdata: Path) -> int:
    """Where the server log ends now (0 when there is none yet)."""
    try:
        return log_path(pgdata).stat().st_size
    except OSError:
        return 0


def panic_since(pgdata: Path, offset: int) -> str | None:
    """The last PANIC the server logged after ``offset`` (from ``PANIC:`` to the line's end,
    blanks folded), or None. A log rotated or cut below ``offset`` is read from its start."""
    path = log_path(pgdata)
    try:
        with path.open("rb") as log:
            size = log.seek(0, 2)
            start = offset if 0 <= offset <= size else 0
            log.seek(max(start, size - TAIL_BYTES))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        # the severity after the line's prefix ("... [pid] PANIC:  ..."): a DETAIL or
        # STATEMENT line quoting the word, or a row's values, is no PANIC
        found = _SEVERITY.search(line)
        if found is not None:
            message = " ".join(line[found.end() :].split())
            return f"{PANIC} {message}" if message else None
    return None
