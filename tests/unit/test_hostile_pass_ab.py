"""Hostile pass AB: findings on files an operator hands the CLI, each a test that failed
before its fix (see each docstring)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from engram.errors import ValidationFailed
from engram.memory.admin.policy import load_policy
from engram.protocols.cli.audit import _anchors

#: An export's rows as ``engram audit export`` writes them, one per line.
ROW = json.dumps({"seq": 1, "action": "CREATE", "content": "x" * 900}) + "\n"


def _heads() -> str:
    return json.dumps(
        {"lane_heads": [{"lane": n, "last_seq": n + 1, "last_hash": "ab" * 32} for n in range(16)]}
    )


def test_an_export_given_as_an_anchor_is_read_from_its_end(tmp_path: Path) -> None:
    """``audit verify --anchor`` takes an export, whose heads are its last line, and read
    the whole file into memory, then split it into a list of lines: a 64 MB export peaked
    at 139 MB, and the export of a large audit log (gigabytes) could not be used as
    the anchor it is documented to be. Only the end of a large file is read now."""
    export = tmp_path / "audit.jsonl"
    rows = ROW * (64 * 1024 * 1024 // len(ROW))
    export.write_text(rows + _heads() + "\n", encoding="utf-8")

    tracemalloc.start()
    try:
        [anchor] = _anchors([export])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert (16, None) == (len(anchor.lane_heads), anchor.checkpoint)
    assert [n + 1 for n in range(16)] == [head.seq for head in anchor.lane_heads]
    assert peak < 8 * 1024 * 1024, peak


def test_a_pretty_printed_checkpoint_is_still_read_whole(tmp_path: Path) -> None:
    """A small anchor of several lines (``checkpoint --json`` piped through a formatter) is
    read whole, as before."""
    document = tmp_path / "heads.json"
    document.write_text(json.dumps(json.loads(_heads()), indent=2), encoding="utf-8")
    [anchor] = _anchors([document])
    assert 16 == len(anchor.lane_heads)


def test_a_policy_file_larger_than_any_policy_is_refused_unread(tmp_path: Path) -> None:
    """``audit replay --policy`` read its file whole: a large file was held in memory and a
    device such as /dev/zero was read until memory ran out. A policy holds a few dozen
    lines; a file over 1 MiB is refused, naming the limit, after reading no more than it."""
    big = tmp_path / "policy.toml"
    big.write_text("# padding\n" * 300_000 + "[advisor]\n", encoding="utf-8")
    with pytest.raises(ValidationFailed, match="larger than 1 MiB"):
        load_policy(big)
