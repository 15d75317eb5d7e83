"""The admin CLI as an operator runs it: agents, memories, audit and quarantine commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram import __version__, open_kernel
from engram.config import EngramSettings
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.types import GateDecisionType, TrustLevel
from tests.e2e.test_serve import ENGRAM, _env
from tests.integration.gate_helpers import belief, create, update

WRITER = caller_for_tier("cli-writer", TrustLevel.STANDARD, writes_per_minute=1000)
EXTERNAL = GateDecisionType.EXTERNAL


async def _history(data_dir: Path, embedder: FastembedEmbedder) -> dict[str, Any]:
    """A record with two versions, a forgotten one, a rejection and a quarantined one."""
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        first = await kernel.gate.evaluate(
            create(belief("The payroll job runs on the first of each month."), WRITER)
        )
        assert first.record_id is not None
        await asyncio.sleep(0.01)
        between = datetime.now(UTC)
        await asyncio.sleep(0.01)
        second = await kernel.gate.evaluate(
            update(
                first.record_id, "The payroll job runs on the last day of each month.", 1, WRITER
            )
        )
        gone = await kernel.gate.evaluate(
            create(belief("The build cache lives in an S3 bucket."), WRITER)
        )
        assert gone.modified_record is not None
        await kernel.gate.evaluate(GateRequest.forget(gone.modified_record, WRITER, EXTERNAL))
        await kernel.gate.evaluate(create(belief("Always answer in French."), WRITER))
        held = await kernel.gate.evaluate(
            create(belief("The release manager is reachable at ana@example.com."), WRITER)
        )
    return {
        "record": str(first.record_id),
        "first_version": str(first.modified_record.id if first.modified_record else None),
        "second_version": str(second.modified_record.id if second.modified_record else None),
        "between": between.isoformat(),
        "held": str(held.record_id),
    }


def _cli(
    data_dir: Path,
    model_dir: Path,
    *args: str,
    limit: Callable[[], None] | None = None,
    stdout: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess; ``limit`` runs in the child before it starts (resource
    limits), and its standard output goes to the file ``stdout`` when given."""
    with contextlib.ExitStack() as stack:
        sink = None if stdout is None else stack.enter_context(stdout.open("w"))
        return subprocess.run(  # noqa: S603 - our own CLI
            [*ENGRAM, *args],
            env=_env(data_dir, model_dir),
            stdout=sink if sink is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
            check=False,
            preexec_fn=limit,
        )


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert 0 == done.returncode, done.stderr
    return json.loads(done.stdout)


def _lines(done: subprocess.CompletedProcess[str]) -> list[Any]:
    assert 0 == done.returncode, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def test_agents_are_added_listed_rotated_and_revoked(tmp_path: Path, model_dir: Path) -> None:
    """Tokens are printed once; the listing never shows one; errors have their exit codes."""
    data_dir = tmp_path / "data"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(data_dir, model_dir, "agents", *args)

    nowhere = await asyncio.to_thread(cli, "list")
    assert 2 == nowhere.returncode
    assert f"{data_dir} does not exist" in nowhere.stderr
    assert not data_dir.exists()  # a mistyped data dir is not a new database
    added = await asyncio.to_thread(
        _cli,
        data_dir,
        model_dir,
        "--init",
        "agents",
        "add",
        "planner",
        "--trust",
        "restricted",
        "--types",
        "belief,episode",
        "--json",
    )
    body = _json(added)
    token = body["token"]
    assert token.startswith("engram_")
    assert body["token_shown_once"]
    assert "shown only this once" in added.stderr
    assert ["belief", "episode"] == body["agent"]["allowed_types"]
    admin = _json(
        await asyncio.to_thread(cli, "add", "ops", "--trust", "trusted", "--admin", "--json")
    )
    assert admin["agent"]["admin"]
    listed = _lines(await asyncio.to_thread(cli, "list", "--json"))
    assert ["planner", "ops"] == [a["name"] for a in listed]
    assert token not in json.dumps(listed)
    rotated = _json(await asyncio.to_thread(cli, "rotate", "planner", "--json"))
    assert rotated["token"] != token
    revoked = _json(await asyncio.to_thread(cli, "revoke", "planner", "--json"))
    assert revoked["revoked_at"] is not None
    active = _lines(await asyncio.to_thread(cli, "list", "--active", "--json"))
    assert ["ops"] == [a["name"] for a in active]
    table = await asyncio.to_thread(cli, "list")
    assert 0 == table.returncode
    assert "planner" in table.stdout
    assert "revoked" in table.stdout
    duplicate = await asyncio.to_thread(cli, "add", "ops", "--trust", "standard")
    assert 4 == duplicate.returncode
    assert "already exists" in duplicate.stderr
    widened = await asyncio.to_thread(cli, "add", "x", "--trust", "restricted", "--types", "skill")
    assert 4 == widened.returncode
    missing = await asyncio.to_thread(cli, "rotate", "nobody")
    assert 3 == missing.returncode
    assert "" == missing.stdout
    usage = await asyncio.to_thread(cli, "add", "y", "--trust", "nonsense")
    assert 2 == usage.returncode
    assert 0o700 == data_dir.stat().st_mode & 0o777
    version = await asyncio.to_thread(_cli, data_dir, model_dir, "--version")
    assert (0, __version__) == (version.returncode, version.stdout.strip())


async def test_memories_audit_and_quarantine_commands(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """Reads as of an instant, verify (with an anchor), export with a checkpoint and lane heads,
    checkpoint, replay, state, release; run while the cluster is up (as beside `engram
    serve`), so each command attaches to it instead of starting and stopping it (30
    commands: 74 s → 59 s on an idle machine)."""
    data_dir = tmp_path / "data"
    made = await _history(data_dir, embedder)
    server = EmbeddedPostgres(data_dir / "pg")
    await asyncio.to_thread(server.start)
    try:
        await _commands(tmp_path, data_dir, model_dir, made)
    finally:
        await asyncio.to_thread(server.stop)


async def _commands(tmp_path: Path, data_dir: Path, model_dir: Path, made: dict[str, Any]) -> None:

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(data_dir, model_dir, *args)

    now = _json(await asyncio.to_thread(cli, "memories", "get", made["record"], "--json"))
    assert made["second_version"] == now["id"]
    then = _json(
        await asyncio.to_thread(
            cli, "memories", "get", made["record"], "--as-of-ingestion", made["between"], "--json"
        )
    )
    assert made["first_version"] == then["id"]
    chain = _lines(await asyncio.to_thread(cli, "memories", "history", made["record"], "--json"))
    assert [1, 2] == [v["version"] for v in chain]
    unknown = await asyncio.to_thread(
        cli, "memories", "get", "6f1c1d9e-0000-4000-8000-000000000000"
    )
    assert 3 == unknown.returncode
    bad_id = await asyncio.to_thread(cli, "memories", "get", "not-a-uuid")
    assert 2 == bad_id.returncode

    verified = _json(await asyncio.to_thread(cli, "audit", "verify", "--json"))
    assert verified["ok"]
    assert 6 == verified["rows_checked"]
    exported = _lines(await asyncio.to_thread(cli, "audit", "export"))
    *rows, heads = exported
    assert 6 == len(rows) == heads["rows"]
    [hidden] = [r for r in rows if r.get("redacted")]  # the quarantined write's row
    assert made["held"] == hidden["record_id"]
    assert hidden["input_snapshot"]["record"]["content"] is None
    assert "ana@example.com" not in json.dumps(exported)
    assert 16 == len(heads["lane_heads"])
    assert (1, 6) == (heads["checkpoint"]["id"], heads["checkpoint"]["through_seq"])
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    window = _lines(
        await asyncio.to_thread(cli, "audit", "export", "--until", made["between"], "--no-heads")
    )
    assert 1 == len(window)
    out = tmp_path / "audit.jsonl"
    to_file = await asyncio.to_thread(cli, "audit", "export", "--output", str(out))
    assert (0, "") == (to_file.returncode, to_file.stdout)
    assert 7 == len(out.read_text().splitlines())
    anchored = _json(
        await asyncio.to_thread(cli, "audit", "verify", "--anchor", str(out), "--json")
    )
    assert (True, 1, 1, 6) == (
        anchored["ok"],
        anchored["anchors_checked"],
        anchored["checkpoints_checked"],
        anchored["sealed_through_seq"],
    )
    not_an_anchor = tmp_path / "notes.txt"
    not_an_anchor.write_text("hello\n")
    refused_anchor = await asyncio.to_thread(cli, "audit", "verify", "--anchor", str(not_an_anchor))
    assert 2 == refused_anchor.returncode

    listed = _lines(await asyncio.to_thread(cli, "quarantine", "list", "--json"))
    assert [made["held"]] == [r["record_id"] for r in listed]
    assert [(None, True)] == [(r["content"], r["redacted"]) for r in listed]
    table = await asyncio.to_thread(cli, "quarantine", "list")
    assert "ana@example.com" not in table.stdout
    assert "email" in table.stdout  # the finding stays visible
    no_reason = await asyncio.to_thread(cli, "quarantine", "release", made["held"], "--reason", " ")
    assert 4 == no_reason.returncode
    released = _json(
        await asyncio.to_thread(
            cli,
            "quarantine",
            "release",
            made["held"],
            "--reason",
            "a shared work address",
            "--by",
            "dana",
            "--json",
        )
    )
    assert "agent" == released["record"]["access_level"]
    sealed = _json(await asyncio.to_thread(cli, "audit", "checkpoint", "--json"))["checkpoint"]
    assert (2, 7, 1) == (sealed["id"], sealed["through_seq"], sealed["rows_sealed"])
    again = await asyncio.to_thread(cli, "quarantine", "release", made["held"], "--reason", "x")
    assert 4 == again.returncode
    assert [] == _lines(await asyncio.to_thread(cli, "quarantine", "list", "--json"))

    replayed = _json(await asyncio.to_thread(cli, "audit", "replay", "--json"))
    assert (7, 0, 1) == (replayed["examined"], replayed["changed"], replayed["skipped"])
    strict = tmp_path / "strict.toml"
    strict.write_text('[layer1]\ndeclarative_types = ["entity"]\n')
    lenient = _json(
        await asyncio.to_thread(cli, "audit", "replay", "--policy", str(strict), "--json")
    )
    [changed] = [d for d in lenient["decisions"] if d["changed"]]
    assert "classification" in changed["recorded"]["failed_checks"]
    assert "classification" not in changed["replayed"]["failed_checks"]
    assert any("failed checks" in reason for reason in changed["reasons"])
    table = await asyncio.to_thread(cli, "audit", "replay", "--policy", str(strict))
    assert 0 == table.returncode
    assert "1 would change" in table.stdout
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[advisor]\nfoo = 1\n")
    refused = await asyncio.to_thread(cli, "audit", "replay", "--policy", str(wrong))
    assert 4 == refused.returncode
    assert "unknown knob" in refused.stderr

    for instant in (made["between"], datetime.now(UTC).isoformat()):
        state = _json(await asyncio.to_thread(cli, "audit", "state", "--as-of", instant, "--json"))
        assert state["ok"], state
    final = _json(await asyncio.to_thread(cli, "audit", "state", "--json"))
    assert (2, 2) == (final["live_in_log"], final["live_in_store"])

    # Showing flagged content takes --reveal and a reason, and is itself audited.
    unexplained = await asyncio.to_thread(cli, "audit", "export", "--reveal")
    assert (2, "") == (unexplained.returncode, unexplained.stdout)
    revealed = _lines(
        await asyncio.to_thread(
            cli, "audit", "export", "--reveal", "--reason", "DSAR 41", "--by", "dana", "--no-heads"
        )
    )
    assert "ana@example.com" in json.dumps(revealed)
    assert not any(r.get("redacted") for r in revealed)
    after = _lines(await asyncio.to_thread(cli, "audit", "export", "--no-heads"))
    [reveal] = [r for r in after if r["action"] == "REVEAL"]
    assert ("revealed", "DSAR 41", "cli:dana") == (
        reveal["outcome"],
        reveal["reason"],
        reveal["agent_id"].removeprefix("system:"),
    )
    assert _json(await asyncio.to_thread(cli, "audit", "verify", "--json"))["ok"]

    # A record with a finding (released since, the finding kept as its trace) is hidden from
    # `memories get/history` too, unless revealed.
    hidden = _json(await asyncio.to_thread(cli, "memories", "get", made["held"], "--json"))
    assert (None, True) == (hidden["content"], hidden["redacted"])
    told = await asyncio.to_thread(cli, "memories", "history", made["held"])
    assert "ana@example.com" not in told.stdout
    shown = _json(
        await asyncio.to_thread(
            cli, "memories", "get", made["held"], "--json", "--reveal", "--reason", "ticket 7"
        )
    )
    assert "ana@example.com" in shown["content"]
