"""Trained policies as versioned rows (``engram.advisor_models``), and their life cycle.

A training run is saved as a *candidate* (``rl@N``, numbered in order). ``promote`` makes a
candidate the active advisor only when its recorded evaluation says it won (ADR-020);
``rollback`` retires the active model and reactivates the one before it (none: the heuristic
advises again). At most one row is active; rows are never deleted, since audit rows name the
version that advised them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram.errors import NotFound, PromotionRefused
from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.rl.features import FEATURE_SCHEMA
from engram.memory.rl.grpo import TrainResult
from engram.memory.rl.policy import AdvisorPolicy

SQL = load_queries("engram.memory.rl", "rl.sql")


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One stored policy and what is known about it."""

    version: str
    status: str
    feature_schema: str
    digest: str
    policy: Mapping[str, Any]
    decisions: int
    data_from: datetime | None
    data_until: datetime | None
    metrics: Mapping[str, Any]
    evaluation: Mapping[str, Any] | None
    created_at: datetime
    promoted_at: datetime | None
    retired_at: datetime | None

    def load(self) -> AdvisorPolicy:
        """The policy itself; refused when fitted to another feature schema."""
        return AdvisorPolicy.from_json(self.policy)

    def to_json(self, *, weights: bool = False) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        out: dict[str, Any] = {
            "version": self.version,
            "status": self.status,
            "feature_schema": self.feature_schema,
            "digest": self.digest,
            "decisions": self.decisions,
            "data_from": iso(self.data_from),
            "data_until": iso(self.data_until),
            "metrics": dict(self.metrics),
            "evaluation": None if self.evaluation is None else dict(self.evaluation),
            "created_at": iso(self.created_at),
            "promoted_at": iso(self.promoted_at),
            "retired_at": iso(self.retired_at),
        }
        if weights:
            out["policy"] = dict(self.policy)
        return out


def _row(record: Mapping[str, Any]) -> ModelRow:
    return ModelRow(
        version=record["version"],
        status=record["status"],
        feature_schema=record["feature_schema"],
        digest=record["digest"],
        policy=record["policy"],
        decisions=int(record["decisions"]),
        data_from=record["data_from"],
        data_until=record["data_until"],
        metrics=record["metrics"],
        evaluation=record["evaluation"],
        created_at=record["created_at"],
        promoted_at=record["promoted_at"],
        retired_at=record["retired_at"],
    )


class ModelStore:
    """Reads and changes ``engram.advisor_models``."""

    def __init__(self, db: DatabaseAdapter) -> None:
        self._db = db

    async def save(
        self,
        result: TrainResult,
        *,
        data_from: datetime | None,
        data_until: datetime | None,
    ) -> ModelRow:
        """Store a training result as the next candidate, ``rl@N``."""

        async def body(conn: Connection) -> ModelRow:
            await conn.execute(SQL["lock_models"])
            version = f"rl@{int(await conn.fetchval(SQL['model_count'])) + 1}"
            policy = AdvisorPolicy(version, result.policy.weights, result.policy.bias)
            metrics = {**result.to_json(), "version": version, "digest": policy.digest()}
            await conn.execute(
                SQL["insert_model"],
                version,
                FEATURE_SCHEMA,
                policy.to_json(),
                policy.digest(),
                data_from,
                data_until,
                result.states,
                metrics,
            )
            row = await conn.fetchrow(SQL["model"], version)
            assert row is not None  # noqa: S101 - inserted above, in this transaction
            return _row(row)

        return await self._db.run_in_transaction(body)

    async def get(self, version: str) -> ModelRow:
        row = await self._db.fetchrow(SQL["model"], version)
        if row is None:
            raise NotFound(f"no advisor model {version!r}")
        return _row(row)

    async def list(self, limit: int = 20) -> list[ModelRow]:
        return [_row(r) for r in await self._db.fetch(SQL["models"], limit)]

    async def active(self) -> ModelRow | None:
        row = await self._db.fetchrow(SQL["active_model"])
        return None if row is None else _row(row)

    async def newest_candidate(self) -> ModelRow | None:
        row = await self._db.fetchrow(SQL["newest_candidate"])
        return None if row is None else _row(row)

    async def feedback_since_training(
        self, since: datetime | None = None, up_to: int = 1_000_000
    ) -> int:
        """Feedback rows given since the newest model was trained and since ``since``,
        counted up to ``up_to`` (the pressure trigger stops counting at its threshold)."""
        return int(await self._db.fetchval(SQL["feedback_since"], since, up_to))

    async def decisions_logged(self) -> int:
        """Outside CREATEs decided by Layer 2 so far (the readiness figure of ``status``)."""
        return int(await self._db.fetchval(SQL["decisions_logged"]))

    async def record_evaluation(self, version: str, report: Mapping[str, Any]) -> None:
        async def body(conn: Connection) -> None:
            await conn.execute(SQL["lock_models"])  # not between a promotion's check and act
            if await conn.fetchval(SQL["set_evaluation"], version, dict(report)) is None:
                raise NotFound(f"no advisor model {version!r}")

        await self._db.run_in_transaction(body)

    async def promote(self, version: str) -> ModelRow:
        """Make ``version`` the active advisor, if its evaluation says it won (checked and
        done under one lock, so a verdict recorded meanwhile is not missed)."""

        async def body(conn: Connection) -> ModelRow:
            await conn.execute(SQL["lock_models"])
            found = await conn.fetchrow(SQL["model"], version)
            if found is None:
                raise NotFound(f"no advisor model {version!r}")
            model = _row(found)
            if model.status == "active":
                return model
            _promotable(model)
            now = datetime.now(UTC)
            retired = await conn.fetchrow(SQL["retire_active"], now)
            await conn.fetchval(SQL["activate"], version, now, retired and retired["version"])
            row = await conn.fetchrow(SQL["model"], version)
            assert row is not None  # noqa: S101 - read above
            return _row(row)

        return await self._db.run_in_transaction(body)

    async def rollback(self) -> ModelRow | None:
        """Retire the active model and reactivate the one its promotion retired (None: the
        heuristic advises again; so too when that model was fitted to another feature
        schema). Without an active model there is nothing to roll back."""

        retiring: str | None = None  # what the first attempt retired (it may have committed)

        async def body(conn: Connection) -> ModelRow | None:
            nonlocal retiring
            await conn.execute(SQL["lock_models"])
            if retiring is not None:
                # A retry: if the first attempt committed (its acknowledgement lost), the
                # model it retired is no longer active, and what is active is its answer.
                retired = await conn.fetchrow(SQL["model"], retiring)
                if retired is not None and retired["status"] != "active":
                    row = await conn.fetchrow(SQL["active_model"])
                    return None if row is None else _row(row)
            current = await conn.fetchrow(SQL["retire_active"], datetime.now(UTC))
            if current is None:
                raise NotFound("no active advisor model to roll back")
            retiring = current["version"]
            previous = current["replaced"]
            row = None if previous is None else await conn.fetchrow(SQL["model"], previous)
            if row is None or row["feature_schema"] != FEATURE_SCHEMA:
                return None
            await conn.fetchval(SQL["reactivate"], previous)
            row = await conn.fetchrow(SQL["model"], previous)
            return None if row is None else _row(row)

        return await self._db.run_in_transaction(body)


def _promotable(model: ModelRow) -> None:
    """Raise :class:`PromotionRefused` unless ``model`` may become the active advisor."""
    if model.feature_schema != FEATURE_SCHEMA:
        raise PromotionRefused(
            f"{model.version} was fitted to {model.feature_schema}; the Gate records "
            f"{FEATURE_SCHEMA}"
        )
    evaluation = model.evaluation
    if evaluation is None:
        raise PromotionRefused(
            f"{model.version} has not been evaluated: run `engram advisor evaluate`"
        )
    if evaluation.get("wins") is not True:
        why = "; ".join(str(r) for r in evaluation.get("reasons", ())) or "it did not win"
        raise PromotionRefused(f"{model.version} did not win its evaluation: {why}")
