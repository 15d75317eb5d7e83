"""Pure parts of the admin commands: redaction of flagged content, release levels, the
schema head read without alembic, and the model-less embedding port."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest
from alembic.script import ScriptDirectory

from engram.errors import EmbeddingError
from engram.infra import migrate
from engram.infra.embedded_server import make_private
from engram.infra.embeddings import NoModel
from engram.memory.admin.redaction import pii_flagged, redact_audit_row, redact_record
from engram.memory.types import AccessLevel
from engram.protocols.cli.quarantine import ReleaseLevel


def test_the_head_revision_read_from_the_files_is_alembics() -> None:
    """Reading the revision files gives the head alembic itself computes."""
    script = ScriptDirectory.from_config(migrate._config("postgresql://nobody@localhost/x"))
    assert script.get_current_head() == migrate.head_revision()


def test_a_release_offers_every_level_but_sensitive() -> None:
    """`quarantine release --level` offers exactly the levels a release accepts."""
    assert {level.value for level in ReleaseLevel} == {
        level.value for level in AccessLevel if level is not AccessLevel.SENSITIVE
    }


def _row(record_id: str | None, *, pii: dict[str, object] | None = None) -> dict[str, object]:
    checks: list[dict[str, object]] = [{"name": "schema", "passed": True}]
    if pii is not None:
        checks.append({"name": "pii", **pii})
    return {
        "seq": 1,
        "record_id": record_id,
        "row_hash": "ab" * 32,
        "layer1_checks": checks,
        "input_snapshot": {
            "record": {"content": "call me on +44 20 7946 0958", "metadata": {}},
            "changes": [{"content": "nested text"}],
        },
    }


def test_rows_about_flagged_records_lose_every_content_but_keep_their_hashes() -> None:
    """A row of a record with a PII finding (now or in an earlier version), or whose own PII
    check flagged it, is redacted at any depth; other rows pass unchanged."""
    flagged_id = uuid4()
    about_flagged = redact_audit_row(_row(str(flagged_id)), {flagged_id})
    assert about_flagged["redacted"] is True
    assert about_flagged["row_hash"] == "ab" * 32
    snapshot = about_flagged["input_snapshot"]
    assert (None, None) == (snapshot["record"]["content"], snapshot["changes"][0]["content"])
    refused = _row(None, pii={"passed": False, "detail": "secret"})
    assert pii_flagged(refused)
    assert redact_audit_row(refused, set())["input_snapshot"]["record"]["content"] is None
    quarantined = _row(str(uuid4()), pii={"passed": True, "quarantined": True})
    assert redact_audit_row(quarantined, set())["redacted"]
    clean = _row(str(uuid4()), pii={"passed": True})
    assert clean == redact_audit_row(clean, {flagged_id})


def test_a_redacted_record_keeps_its_finding() -> None:
    """The listing hides the text, not what was found."""
    view = {"content": "ana@example.com", "metadata": {"pii": {"kinds": ["email"]}}}
    hidden = redact_record(view)
    assert (None, ["email"], True) == (
        hidden["content"],
        hidden["metadata"]["pii"]["kinds"],
        hidden["redacted"],
    )


async def test_a_kernel_without_its_model_says_so_when_asked_to_embed() -> None:
    """The admin commands' embedding port refuses every use with a typed error."""
    port = NoModel(384, "all-MiniLM-L6-v2")
    assert (384, "all-MiniLM-L6-v2") == (port.dimension, port.model_name)
    for attempt in (port.embed_one("x"), port.embed_batch(["x"]), port.ping()):
        with pytest.raises(EmbeddingError, match="without the embedding model"):
            await attempt
    await port.close()


def test_the_replay_advisors_the_cli_offers_are_the_ones_replay_knows() -> None:
    """`audit replay --advisor` lists exactly the advisors a replay accepts."""
    from engram.memory.admin.policy import ADVISORS  # noqa: PLC0415
    from engram.protocols.cli.audit import REPLAY_ADVISORS  # noqa: PLC0415

    assert tuple(ADVISORS) == REPLAY_ADVISORS


def test_the_admin_commands_do_not_import_the_gate_or_the_model() -> None:
    """Importing the command line (what `engram agents list` pays before it starts) pulls in
    neither the kernel, the Gate's classifier and PII screens, NumPy, SciPy nor alembic."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    probe = (
        "import sys, engram.protocols.cli.main; "
        "heavy = ['engram.kernel', 'engram.memory.gate.librarian', "
        "'engram.memory.conflict.detection', 'numpy', 'scipy', 'alembic', 'fastembed', "
        "'onnxruntime']; print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed probe
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert "[]" == done.stdout.strip()


def test_personal_data_in_metadata_or_a_refused_raw_input_is_redacted_too() -> None:
    """The PII screen reads metadata, so a redacted view keeps only the finding of it; a raw
    input refused before any screening (malformed) or cut to an excerpt (too large) keeps
    only its size and digest."""
    view = {
        "content": "standup notes",
        "metadata": {"contact": "alice@example.com", "pii": {"kinds": ["email"]}},
    }
    assert {"pii": {"kinds": ["email"]}} == redact_record(view)["metadata"]
    malformed = {
        "seq": 2,
        "record_id": None,
        "layer1_checks": [{"name": "schema", "passed": False}],
        "input_snapshot": {"raw": {"type": "nonsense", "content": "call bob@example.com"}},
    }
    huge = {
        "seq": 3,
        "record_id": None,
        "layer1_checks": [{"name": "rate_limit", "passed": False}],
        "input_snapshot": {
            "action": "CREATE",
            "raw": {"excerpt": '{"content": "mail alice@example.com', "bytes": 9000},
        },
    }
    for row in (malformed, huge):
        shown = redact_audit_row(row, set())
        assert shown["redacted"]
        assert "example.com" not in str(shown)
    assert {"bytes": 9000} == redact_audit_row(huge, set())["input_snapshot"]["raw"]


def test_the_data_dir_is_narrowed_only_when_it_is_engrams(tmp_path: Path) -> None:
    """A new data dir is 0700, and so is an existing one holding only engram's entries; a
    folder holding anything else (ENGRAM_DATA_DIR pointed at a home) is left as it was."""
    fresh = tmp_path / "fresh" / "data"
    make_private(fresh)
    assert 0o700 == fresh.stat().st_mode & 0o777
    ours = tmp_path / "ours"
    (ours / "models").mkdir(parents=True)
    ours.chmod(0o755)
    make_private(ours)
    assert 0o700 == ours.stat().st_mode & 0o777
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    home.chmod(0o755)
    make_private(home)
    assert 0o755 == home.stat().st_mode & 0o777
