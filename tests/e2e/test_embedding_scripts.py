"""The kernel embedded from Python the ways people run Python: the README's example as a
script, the same code piped to ``python -``, and a script with no ``__main__`` guard.

Run with the model in a worker process (``ENGRAM_EMBEDDING_WORKERS=1``): the workers are
spawned processes, and they used to re-import the caller's main module, which killed them
("embedding worker died") for code read from standard input and for a script without a
guard. The default, the model on a thread, spawns nothing; the e2e serve tests run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e.test_serve import _env

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _readme_example() -> str:
    [block] = PYTHON_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))
    return str(block)


def _run(
    args: list[str], data_dir: Path, model_dir: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own example code
        args,
        input=stdin,
        env=_env(data_dir, model_dir, ENGRAM_EMBEDDING_WORKERS="1"),
        cwd=data_dir.parent,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _check(done: subprocess.CompletedProcess[str]) -> None:
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("approved ") for line in lines), done.stdout
    assert "The ledger runs on PostgreSQL." in lines
    assert "embedding worker died" not in done.stderr


@pytest.mark.slow
def test_the_readme_example_runs_as_a_script(tmp_path: Path, model_dir: Path) -> None:
    """`python example.py` with the README's block, as printed."""
    script = tmp_path / "example.py"
    script.write_text(_readme_example(), encoding="utf-8")
    _check(_run([sys.executable, str(script)], tmp_path / ".engram", model_dir))


@pytest.mark.slow
def test_the_example_runs_from_standard_input(tmp_path: Path, model_dir: Path) -> None:
    """`python - <<EOF`: there is no file a worker could re-import."""
    _check(_run([sys.executable, "-"], tmp_path / ".engram", model_dir, _readme_example()))


@pytest.mark.slow
def test_a_script_without_a_main_guard_works(tmp_path: Path, model_dir: Path) -> None:
    """Top-level ``asyncio.run(main())``: a worker re-running it would open a second kernel."""
    unguarded = _readme_example().replace(
        'if __name__ == "__main__":\n    asyncio.run(main())', "asyncio.run(main())"
    )
    assert 'if __name__ == "__main__"' not in unguarded
    script = tmp_path / "unguarded.py"
    script.write_text(unguarded, encoding="utf-8")
    _check(_run([sys.executable, str(script)], tmp_path / ".engram", model_dir))
