"""Fixtures of the operations tests (``make test-ops``): a real `engram serve`, a real Prometheus.

They need the ``prometheus`` and ``promtool`` binaries (``make test-ops`` installs Debian's
package) and take about a minute, so ``make test`` leaves them out: they are collected only
with ``ENGRAM_OPS_TESTS=1``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.stack import Stack, open_stack

collect_ignore_glob = [] if os.environ.get("ENGRAM_OPS_TESTS") == "1" else ["test_*.py"]


@pytest.fixture(scope="session")
def prometheus_binaries() -> None:
    """Fail, saying how to get them, unless prometheus and promtool are on the PATH."""
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: run `make test-ops`, which installs them")


@pytest.fixture(scope="module")
def stack(prometheus_binaries: None, model_dir: Path) -> Iterator[Stack]:
    """engram serving a fresh embedded data dir, scraped every second by Prometheus.

    The directory is its own, not under pytest's base temp: another pytest session on the
    machine prunes old base temps, and would pull the data dir away from under the server.
    """
    del prometheus_binaries
    with (
        tempfile.TemporaryDirectory(prefix="engram-ops-", ignore_cleanup_errors=True) as tmp,
        open_stack(Path(tmp), model_dir) as running,
    ):
        yield running
