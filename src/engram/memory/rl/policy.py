"""The advisor's policy: a linear softmax over what Layer 2 saw (ADR-020).

:class:`AdvisorPolicy` maps the state vector of :mod:`engram.memory.rl.features` to a
distribution over the actions an outside CREATE can take: store it (``ADD``), or reinforce
the nearest record instead (``NOOP``). A few hundred multiplications, well under the 1 ms a
decision may cost, and every weight can be read. Scored by the Gate's
:class:`~engram.memory.gate.learned.RLAdvisor`, trained by :mod:`engram.memory.rl.grpo`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engram.errors import ValidationFailed
from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES, FEATURE_SCHEMA

#: The actions the policy chooses between, in the order of its rows.
ACTIONS: tuple[str, ...] = ("ADD", "NOOP")
#: A NOOP reinforces the nearest record only from this similarity up.
NOOP_FLOOR = 0.75
#: … and only when the proposal restates it, or the classifier finds them less likely
#: incompatible than this.
NOOP_MAX_INCOMPATIBLE = 0.5
_INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}

Vector = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class AdvisorPolicy:
    """Linear softmax weights, one row per action of :data:`ACTIONS`."""

    version: str
    weights: Vector  # (actions, features)
    bias: Vector  # (actions,)

    def __post_init__(self) -> None:
        expected = (len(ACTIONS), FEATURE_COUNT)
        if self.weights.shape != expected or self.bias.shape != expected[:1]:
            shape = f"{self.weights.shape} + {self.bias.shape}"
            raise ValidationFailed(errors=[f"policy shape {shape}, expected {expected}"])
        if not (np.isfinite(self.weights).all() and np.isfinite(self.bias).all()):
            raise ValidationFailed(errors=["policy weights must be finite"])

    @classmethod
    def zeros(cls, version: str) -> AdvisorPolicy:
        return cls(version, np.zeros((len(ACTIONS), FEATURE_COUNT)), np.zeros(len(ACTIONS)))

    def logits(self, states: Vector) -> Vector:
        """Action logits for a (n, features) matrix of states."""
        return states @ self.weights.T + self.bias

    def probabilities(self, states: Vector, allowed: Vector | None = None) -> Vector:
        """π(a | s) for each row of ``states``; ``allowed`` (n, actions) masks actions out."""
        return softmax(self.logits(states), allowed)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "schema": FEATURE_SCHEMA,
            "features": list(FEATURE_NAMES),
            "actions": list(ACTIONS),
            "weights": [[round(float(w), 8) for w in row] for row in self.weights],
            "bias": [round(float(b), 8) for b in self.bias],
        }

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form: what an audit row's model version pins."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AdvisorPolicy:
        """A policy stored by :meth:`to_json`; refused when fitted to another feature schema."""
        if data.get("schema") != FEATURE_SCHEMA or list(data.get("features", ())) != list(
            FEATURE_NAMES
        ):
            raise ValidationFailed(
                errors=[f"policy fitted to {data.get('schema')!r}, the Gate has {FEATURE_SCHEMA}"]
            )
        if [str(a) for a in data.get("actions", ())] != list(ACTIONS):
            raise ValidationFailed(errors=["policy actions differ from the Gate's"])
        return cls(
            str(data["version"]),
            np.asarray(data["weights"], dtype=np.float64),
            np.asarray(data["bias"], dtype=np.float64),
        )


def softmax(logits: Vector, allowed: Vector | None = None) -> Vector:
    """Row-wise softmax; masked actions get probability 0 (each row allows at least one)."""
    z = np.where(allowed > 0, logits, -np.inf) if allowed is not None else logits
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def allowed_actions(state: Sequence[float]) -> tuple[float, ...]:
    """1 for each action of :data:`ACTIONS` the Gate may take in ``state``, else 0.

    An exact duplicate may only be reinforced. A NOOP drops the proposal's words, so it is
    never allowed when they carry a name, code or value the nearest record lacks, or a word of
    change; beyond that it needs a nearest record of the same scope, at least ``NOOP_FLOOR``
    similar, that the proposal restates in its words, or that the conflict classifier finds
    compatible, or whose every name, code and value the proposal repeats with no conflict
    found (a flipped negation keeps every mark: the classifier's conflict stops it)."""
    if state[_INDEX["exact_duplicate"]] >= 1.0:
        return (0.0, 1.0)
    noop = (
        state[_INDEX["closest"]] >= NOOP_FLOOR
        and state[_INDEX["other_scope"]] < 1.0
        and state[_INDEX["new_marks"]] < 1.0
        and state[_INDEX["change_words"]] < 1.0
        and (
            state[_INDEX["restates"]] >= 1.0
            or state[_INDEX["incompatible"]] < NOOP_MAX_INCOMPATIBLE
            or (state[_INDEX["kept_marks"]] >= 1.0 and state[_INDEX["in_conflict"]] < 1.0)
        )
    )
    return (1.0, 1.0 if noop else 0.0)


def entropy(p: Vector) -> float:
    """Mean entropy of rows of probabilities (nats), for training reports."""
    safe = np.clip(p, 1e-12, 1.0)
    return float(-(p * np.log(safe)).sum(axis=-1).mean()) if len(p) else math.nan
