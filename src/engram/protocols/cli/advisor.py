"""``engram advisor train|evaluate|promote|rollback|status``: the learned advisor's life cycle
(ADR-020).

``train`` fits a candidate on the logged decisions and their feedback; ``evaluate`` judges a
candidate against the heuristic on held-out simulated agent lives and on the real audit log;
``promote`` makes it the active advisor only when that evaluation says it won; ``rollback``
returns to the model before (or to the heuristic); ``status`` shows the models, the one
serving and how much data there is. Kernels pick up a promotion or rollback within
``ENGRAM_ADVISOR_RELOAD_SECONDS`` when ``ENGRAM_ADVISOR=rl``.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram.config import EngramSettings
from engram.memory.rl.windows import HORIZON, MIN_DECISIONS, WINDOW
from engram.protocols.cli.output import print_json, print_table, when, with_kernel

if TYPE_CHECKING:
    from engram.kernel import Kernel
    from engram.memory.rl.models import ModelRow

app = typer.Typer(help="The learned Gate advisor: train, evaluate, promote, roll back.")
#: The specification's readiness threshold for a learned advisor (decisions logged).
READY_DECISIONS = 10_000

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
#: The longest window or horizon ``train`` takes, in days (a century: older decisions do not
#: exist, and ``now`` minus both must stay a date).
MAX_DAYS = 36_500.0
#: The most lives, writes or questions per life, and evaluation seeds skipped, ``evaluate``
#: takes: a life is generated whole before it is played (a million writes is gigabytes), and
#: a seed of more digits would not fit in its life's namespace.
MAX_LIVES = 1_000
MAX_LIFE_STEPS = 10_000
MAX_FIRST_SEED = 1_000_000_000


def _summary(model: ModelRow) -> list[str]:
    evaluation = model.evaluation or {}
    verdict = "" if not evaluation else ("wins" if evaluation.get("wins") else "loses")
    curve = model.metrics.get("reward_curve") or []
    gain = f"{curve[-1] - curve[0]:+.3f}" if curve else ""
    return [
        model.version,
        model.status,
        str(model.decisions),
        gain,
        verdict,
        when(model.created_at),
        when(model.promoted_at),
        model.digest[:12],
    ]


@app.command("train")
def advisor_train(
    days: Annotated[
        float,
        typer.Option(
            help="Train on the decisions of the last DAYS days.",
            min=0.001,
            max=MAX_DAYS,
        ),
    ] = WINDOW.days,
    horizon_days: Annotated[
        float,
        typer.Option(
            help="Feedback this long after a decision counts; only decisions at least this "
            "old are trained on (their outcome is complete).",
            min=0.001,
            max=MAX_DAYS,
        ),
    ] = HORIZON.days,
    min_decisions: Annotated[
        int, typer.Option(help="Train nothing below this many decisions.", min=1)
    ] = MIN_DECISIONS,
    as_json: JsonOption = False,
) -> None:
    """Train a candidate advisor now (it advises nobody until promoted)."""

    from engram.memory.rl.runs import train_candidate  # noqa: PLC0415 - NumPy, this command

    async def work(kernel: Kernel) -> dict[str, Any]:
        horizon = timedelta(days=horizon_days)
        run = await train_candidate(
            kernel.db,
            until=datetime.now(UTC) - horizon,
            window=timedelta(days=days),
            horizon=horizon,
            min_decisions=min_decisions,
        )
        return run.to_json()

    done = with_kernel(work, model=False)
    if as_json:
        print_json(done)
        return
    model = done["model"]
    if model is None:
        typer.echo(f"nothing trained: {done['reason']}")
        return
    curve = model["metrics"]["reward_curve"]
    typer.echo(
        f"{model['version']}: candidate trained on {done['decisions']} decisions in "
        f"{model['metrics']['seconds']} s; expected reward {curve[0]:.3f} -> {curve[-1]:.3f} "
        f"(heuristic {model['metrics']['reference_reward']:.3f}); "
        f"next: engram advisor evaluate {model['version']}"
    )


def private_settings(data_dir: Path, model_dir: Path) -> EngramSettings:
    """Settings of the evaluation's own embedded kernel: nothing taken from the environment
    that could reach the operator's systems (database, webhook, summariser) or change what is
    measured (advisor, scheduler)."""
    return EngramSettings(
        database_url=None,
        migration_database_url=None,
        data_dir=data_dir,
        embedding_model_path=model_dir,
        webhook_url=None,
        summarizer_url=None,
        agent_token=None,
        scheduler=False,
        advisor="heuristic",
        advisor_shadow=False,
        migrate_on_start=True,
    )


async def evaluate_model(
    kernel: Kernel,
    version: str,
    *,
    lives: int,
    writes: int,
    questions: int,
    first_seed: int = 0,
) -> dict[str, Any]:
    """Judge ``version`` against the heuristic (held-out simulated lives on a private
    embedded database; counterfactual replay of the decisions this database logged after
    the model's training data ends) and record the verdict on its row."""
    # The learning code, the simulator and the whole kernel: only this command needs them.
    from engram.kernel import open_kernel  # noqa: PLC0415
    from engram.memory.rl.decisions import training_data  # noqa: PLC0415
    from engram.protocols.simulator.evaluation import (  # noqa: PLC0415
        replay_logged,
        simulate,
        verdict,
    )

    model = await kernel.advisor_models.get(version)
    policy = model.load()
    now = datetime.now(UTC)
    since = model.data_until or model.created_at
    data = await training_data(kernel.db, since=since + timedelta(microseconds=1), until=now)
    replay = replay_logged(data.examples, policy)
    with tempfile.TemporaryDirectory(prefix="engram-eval-") as scratch:
        settings = private_settings(Path(scratch), kernel.settings.model_dir)
        async with open_kernel(settings=settings, embeddings=kernel.embeddings) as private:
            side = await simulate(
                private,
                policy,
                count=lives,
                writes=writes,
                questions=questions,
                first=first_seed,
            )
    wins, reasons = verdict(side, replay)
    report = {
        "version": version,
        "digest": model.digest,
        "evaluated_at": now.isoformat(),
        "wins": wins,
        "reasons": reasons,
        "simulation": {
            "lives": lives,
            "first_seed": first_seed,
            "writes": writes,
            "questions": questions,
            **side.to_json(),
        },
        "replay": replay,
    }
    await kernel.advisor_models.record_evaluation(version, report)
    return report


@app.command("evaluate")
def advisor_evaluate(  # noqa: PLR0917 - typer passes every option by keyword
    version: Annotated[str, typer.Argument(help="A trained model, e.g. rl@3.")],
    lives: Annotated[
        int, typer.Option(help="Held-out simulated agent lives.", min=1, max=MAX_LIVES)
    ] = 3,
    writes: Annotated[int, typer.Option(help="Writes per life.", min=10, max=MAX_LIFE_STEPS)] = 240,
    questions: Annotated[
        int, typer.Option(help="Questions per life.", min=1, max=MAX_LIFE_STEPS)
    ] = 80,
    first_seed: Annotated[
        int,
        typer.Option(
            help="Skip this many evaluation seeds (lives not judged before).",
            min=0,
            max=MAX_FIRST_SEED,
        ),
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Judge a candidate against the heuristic and record the verdict promotion needs."""

    async def work(kernel: Kernel) -> dict[str, Any]:
        return await evaluate_model(
            kernel,
            version,
            lives=lives,
            writes=writes,
            questions=questions,
            first_seed=first_seed,
        )

    report = with_kernel(work)
    if as_json:
        print_json(report)
        return
    h, c = report["simulation"]["heuristic"], report["simulation"]["candidate"]
    replay = report["replay"]
    print_table(
        f"{version} against the heuristic ({lives} held-out lives)",
        ["", "usefulness", "store size", "duplicates admitted", "facts lost"],
        [
            [
                "heuristic",
                h["usefulness"],
                h["store_size"],
                h["duplicates_admitted"],
                h["facts_lost"],
            ],
            [
                "candidate",
                c["usefulness"],
                c["store_size"],
                c["duplicates_admitted"],
                c["facts_lost"],
            ],
        ],
    )
    if replay.get("decisions"):
        typer.echo(
            f"replay of {replay['decisions']} logged decisions: reward "
            f"{replay['candidate_reward']} vs {replay['heuristic_reward']}, "
            f"{replay['changed']} changed, {replay['dropped_useful_records']} useful dropped"
        )
    verdict_text = "wins" if report["wins"] else "does not win: " + "; ".join(report["reasons"])
    typer.echo(f"{version} {verdict_text}")


@app.command("promote")
def advisor_promote(
    version: Annotated[str, typer.Argument(help="A candidate, e.g. rl@3.")],
    as_json: JsonOption = False,
) -> None:
    """Make a candidate the active advisor; refused unless its evaluation says it won."""

    async def work(kernel: Kernel) -> ModelRow:
        return await kernel.advisor_models.promote(version)

    model = with_kernel(work, model=False)
    if as_json:
        print_json(model.to_json())
    else:
        typer.echo(f"{model.version} is the active advisor (kernels with ENGRAM_ADVISOR=rl)")


@app.command("rollback")
def advisor_rollback(as_json: JsonOption = False) -> None:
    """Retire the active model; the one active before it (or the heuristic) advises again."""

    async def work(kernel: Kernel) -> ModelRow | None:
        return await kernel.advisor_models.rollback()

    model = with_kernel(work, model=False)
    if as_json:
        print_json({"active": None if model is None else model.to_json()})
    elif model is None:
        typer.echo("no model is active: the heuristic advises")
    else:
        typer.echo(f"{model.version} is the active advisor again")


@app.command("status")
def advisor_status(
    limit: Annotated[
        int, typer.Option(help="Models listed, newest first.", min=1, max=10_000)
    ] = 20,
    as_json: JsonOption = False,
) -> None:
    """The models, the active one, the decisions logged and whether that is enough."""

    async def work(kernel: Kernel) -> tuple[dict[str, Any], list[ModelRow]]:
        store = kernel.advisor_models
        models = await store.list(limit)
        active = await store.active()
        logged = await store.decisions_logged()
        return {
            "configured": kernel.settings.advisor,
            "shadow": kernel.settings.advisor_shadow,
            "active": None if active is None else active.version,
            "decisions_logged": logged,
            "ready_threshold": READY_DECISIONS,
            "ready": logged >= READY_DECISIONS,
            "feedback_since_training": await store.feedback_since_training(),
            "models": [m.to_json() for m in models],
        }, models

    status, models = with_kernel(work, model=False)
    if as_json:
        print_json(status)
        return
    ready = "ready" if status["ready"] else "not yet ready"
    typer.echo(
        f"advisor: {status['configured']}{' + shadow' if status['shadow'] else ''}; "
        f"active model: {status['active'] or 'none (heuristic)'}; "
        f"{status['decisions_logged']} decisions logged ({ready} at {READY_DECISIONS}); "
        f"{status['feedback_since_training']} feedback rows since the last training"
    )
    if models:
        columns = ["model", "status", "decisions", "reward gain", "evaluation", "trained"]
        print_table(None, [*columns, "promoted", "digest"], [_summary(m) for m in models])
