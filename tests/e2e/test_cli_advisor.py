"""``engram advisor`` as an operator runs it before any model exists: what the commands say
about the heuristic, and how they refuse what cannot be done (a training with too few
decisions, a model that does not exist, a rollback with nothing active). Each refusal is a
message on stderr and the documented exit code, never a traceback, and changes nothing."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.access import caller_for_tier
from engram.memory.rl.grpo import TrainResult
from engram.memory.rl.models import ModelStore
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import TrustLevel
from tests.e2e.test_cli_admin import _cli, _json
from tests.integration.gate_helpers import belief, create

WRITER = caller_for_tier("advisor-cli-writer", TrustLevel.STANDARD, writes_per_minute=1000)
#: ``EXIT_CODES``: NotFound.
NOT_FOUND = 3
#: ``EXIT_USAGE``: an option out of its range.
USAGE = 2


async def _two_decisions(data_dir: Path, embedder: FastembedEmbedder) -> None:
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for text in ("The on-call rota changes on Mondays.", "Invoices are paid within 30 days."):
            result = await kernel.gate.evaluate(create(belief(text), WRITER))
            assert result.record_id is not None, result.reason


def _refused(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, done
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


async def test_advisor_commands_before_any_model(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """Status names the heuristic and the decisions logged; a training below its minimum
    stores nothing and says why; promoting, evaluating or rolling back a model that is not
    there exits 3 with the reason; the status afterwards is what it was."""
    data_dir = tmp_path / "data"
    await _two_decisions(data_dir, embedder)

    before = _json(_cli(data_dir, model_dir, "advisor", "status", "--json"))
    assert (before["configured"], before["active"], before["models"]) == ("heuristic", None, [])
    assert before["decisions_logged"] >= 2
    assert before["ready"] is False
    text = _cli(data_dir, model_dir, "advisor", "status")
    assert 0 == text.returncode, text.stderr
    assert "active model: none (heuristic)" in text.stdout

    trained = _json(
        _cli(data_dir, model_dir, "advisor", "train", "--min-decisions", "100000", "--json")
    )
    assert trained["model"] is None
    assert trained["reason"]
    said = _cli(data_dir, model_dir, "advisor", "train", "--min-decisions", "100000")
    assert 0 == said.returncode, said.stderr
    assert said.stdout.startswith("nothing trained: ")

    _refused(_cli(data_dir, model_dir, "advisor", "promote", "rl@99"), NOT_FOUND, "rl@99")
    _refused(_cli(data_dir, model_dir, "advisor", "promote", "x" * 5000), NOT_FOUND, "no advisor")
    _refused(_cli(data_dir, model_dir, "advisor", "rollback"), NOT_FOUND, "no active advisor model")
    _refused(
        _cli(data_dir, model_dir, "advisor", "evaluate", "rl@99", "--lives", "1"),
        NOT_FOUND,
        "rl@99",
    )

    after = _json(_cli(data_dir, model_dir, "advisor", "status", "--json"))
    assert after == before


async def _a_candidate(data_dir: Path, embedder: FastembedEmbedder) -> str:
    """A stored candidate (untrained weights): what ``evaluate`` judges."""
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    untrained = TrainResult(
        policy=AdvisorPolicy.zeros("untrained"),
        states=0,
        epochs=0,
        seconds=0.0,
        reward_curve=(0.0,),
        reference_reward=0.0,
        kl_to_reference=0.0,
        agreement_with_reference=1.0,
        entropy=0.0,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        row = await ModelStore(kernel.db).save(untrained, data_from=None, data_until=None)
    return row.version


def _bounded_cli(data_dir: Path, model_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with at most 6 GiB of address space: a command that tries to hold tens of
    gigabytes raises MemoryError instead of taking the machine's memory."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    return _cli(data_dir, model_dir, *args, limit=limit)


async def test_evaluate_takes_a_far_seed_and_refuses_sizes_it_cannot_hold(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """``--first-seed 1000000000`` built the list of every evaluation seed up to it (36 GB:
    a MemoryError traceback under this limit, the machine's memory without it) and then
    judged one life; it now makes only the seeds it plays. Writes, questions and lives past
    what a life can hold are usage errors (exit 2) before anything is opened, and a seed
    further on than a life's namespace can name is refused likewise."""
    data_dir = tmp_path / "data"
    version = await _a_candidate(data_dir, embedder)
    far = _bounded_cli(
        data_dir,
        model_dir,
        *("advisor", "evaluate", version, "--lives", "1", "--writes", "10", "--questions", "1"),
        *("--first-seed", "1000000000", "--json"),
    )
    report = _json(far)
    lives = report["simulation"]["lives"]
    assert (1_000_000_000, [1_000_009_000], [1_000_009_000]) == (
        report["simulation"]["first_seed"],
        [life["seed"] for life in lives["heuristic"]],
        [life["seed"] for life in lives["candidate"]],
    )
    for option in ("--writes", "--questions", "--lives", "--first-seed"):
        huge = _bounded_cli(
            data_dir, model_dir, "advisor", "evaluate", version, option, "100000000000"
        )
        _refused(huge, USAGE, option)
