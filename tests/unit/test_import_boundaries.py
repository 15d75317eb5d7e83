"""The import contracts hold, and the memory layers contract is not vacuous: an import that
goes up the layers inside engram.memory breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(  # noqa: S603 - the project's own linter on a copy of its code
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_store_module_importing_the_gate_breaks_the_memory_layers(tmp_path: Path) -> None:
    """A copy of the code with ``store`` importing ``gate`` fails lint-imports, naming the
    memory layers contract; the unchanged copy passes."""
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    assert 0 == _lint(tmp_path).returncode
    planted = tmp_path / "src/engram/memory/store/versions.py"
    planted.write_text(planted.read_text() + "\nimport engram.memory.gate.librarian  # planted\n")
    broken = _lint(tmp_path)
    assert (1, True) == (broken.returncode, "Inside memory" in broken.stdout), broken.stdout
