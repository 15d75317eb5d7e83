"""The README's configuration table matches the settings the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from engram.config import EngramSettings

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(ENGRAM_[A-Z_]+)` \| ([^|]+) \|", re.MULTILINE)


def _documented() -> dict[str, str]:
    return {name: default.strip() for name, default in ROW.findall(README.read_text())}


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def test_every_setting_is_documented_with_its_default() -> None:
    """Each EngramSettings field appears in the README table with the code's default."""
    expected = {
        f"ENGRAM_{name.upper()}": _shown(field.default)
        for name, field in EngramSettings.model_fields.items()
    }
    assert expected == _documented()


def test_readme_opens_with_the_two_commands() -> None:
    """The Quick start names `make run` and `make test` before anything else."""
    text = README.read_text()
    quick_start = text.index("## Quick start")
    assert quick_start < text.index("make run") < text.index("## Configuration")
    assert quick_start < text.index("make test") < text.index("## Configuration")
