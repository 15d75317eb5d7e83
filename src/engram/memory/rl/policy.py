"""The advisor's policy: a linear softmax over what Layer 2 saw (ADR-020).

:class:`AdvisorPolicy` maps the state vector of :mod:`engram.memory.rl.features` to a
distribution over the actions an outside CREATE can take: store it (``ADD``), reinforce
the nearest record instead (``NOOP``), or merge it into the nearest record as that record's
next version (``UPDATE``). A few hundred multiplications, well under the 1 ms a
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

#: The actions the policy chooses between, in the order of its rows. Models trained before
#: UPDATE existed chose between the first two; they load and never merge.
ACTIONS: tuple[str, ...] = ("ADD", "NOOP", "UPDATE")
#: A NOOP reinforces the nearest record only from this similarity up.
NOOP_FLOOR = 0.75
#: … and only when the proposal restates it, or the classifier finds them less likely
#: incompatible than this.
NOOP_MAX_INCOMPATIBLE = 0.5
#: An UPDATE merges into the nearest record only from this similarity up (the heuristic's
#: update-candidate threshold) …
MERGE_FLOOR = 0.65
#: … and only when the classifier finds the two at least this likely incompatible (a merge
#: replaces the nearest record's content: both must not be true at once).
MERGE_MIN_INCOMPATIBLE = 0.5
_INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}

Vector = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class AdvisorPolicy:
    """Linear softmax weights, one row per action it was trained with (``actions``, the
    first ones of :data:`ACTIONS`); the actions it never learned get probability 0."""

    version: str
    weights: Vector  # (actions, features)
    bias: Vector  # (actions,)
    actions: tuple[str, ...] = ACTIONS

    def __post_init__(self) -> None:
        if self.actions != ACTIONS[: len(self.actions)] or len(self.actions) < 2:
            raise ValidationFailed(errors=["policy actions differ from the Gate's"])
        expected = (len(self.actions), FEATURE_COUNT)
        if self.weights.shape != expected or self.bias.shape != expected[:1]:
            shape = f"{self.weights.shape} + {self.bias.shape}"
            raise ValidationFailed(errors=[f"policy shape {shape}, expected {expected}"])
        if not (np.isfinite(self.weights).all() and np.isfinite(self.bias).all()):
            raise ValidationFailed(errors=["policy weights must be finite"])

    @classmethod
    def zeros(cls, version: str) -> AdvisorPolicy:
        return cls(version, np.zeros((len(ACTIONS), FEATURE_COUNT)), np.zeros(len(ACTIONS)))

    def logits(self, states: Vector) -> Vector:
        """Action logits for a (n, features) matrix of states, one column per action of
        :data:`ACTIONS` (0 for an action the policy was not trained with)."""
        known = states @ self.weights.T + self.bias
        missing = len(ACTIONS) - len(self.actions)
        return np.pad(known, ((0, 0), (0, missing))) if missing else known

    def probabilities(self, states: Vector, allowed: Vector | None = None) -> Vector:
        """π(a | s) for each row of ``states``; ``allowed`` (n, actions) masks actions out,
        and so does the policy itself for the actions it was not trained with."""
        trained = np.zeros(len(ACTIONS))
        trained[: len(self.actions)] = 1.0
        mask = trained if allowed is None else np.asarray(allowed) * trained
        return softmax(self.logits(states), np.broadcast_to(mask, (len(states), len(ACTIONS))))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "schema": FEATURE_SCHEMA,
            "features": list(FEATURE_NAMES),
            "actions": list(self.actions),
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
        return cls(
            str(data["version"]),
            np.asarray(data["weights"], dtype=np.float64),
            np.asarray(data["bias"], dtype=np.float64),
            tuple(str(a) for a in data.get("actions", ())),
        )


def softmax(logits: Vector, allowed: Vector | None = None) -> Vector:
    """Row-wise softmax; masked actions get probability 0 (each row allows at least one)."""
    z = np.where(allowed > 0, logits, -np.inf) if allowed is not None else logits
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def allowed_actions(state: Sequence[float], *, merge_allowed: bool = True) -> tuple[float, ...]:
    """1 for each action of :data:`ACTIONS` the Gate may take in ``state``, else 0;
    ``merge_allowed``: whether the access rules let the write merge into its nearest record
    (the Gate's answer, recorded beside the state: the state cannot say whose record it is).

    An exact duplicate may only be reinforced. A NOOP drops the proposal's words, so it is
    never allowed when they carry a name, code or value the nearest record lacks, or a word of
    change; beyond that it needs a nearest record of the same scope, at least ``NOOP_FLOOR``
    similar, that the proposal restates in its words, or that the conflict classifier finds
    compatible, or whose every name, code and value the proposal repeats with no conflict
    found (a flipped negation keeps every mark: the classifier's conflict stops it).

    An UPDATE replaces the nearest record's content with the proposal's (the older content
    stays in its history), so it needs a nearest record of the same scope, at least
    ``MERGE_FLOOR`` similar, that the conflict classifier finds incompatible with the proposal
    (at least ``MERGE_MIN_INCOMPATIBLE``: keeping both would keep one that is no longer true),
    and a proposal that says in its own words that the world changed (a word of change the
    nearest does not have; a supersession the classifier found is not enough), brings a name,
    code or value the nearest lacks, and repeats at least one of the nearest's (what it
    replaces: "from 17:00 to 15:45"), with no dispute found (a contradiction or an
    unresolvable pair goes to a person, never merged away), and ``merge_allowed``: the nearest
    record is the caller's own (:func:`~engram.memory.gate.access.merge_denial`)."""
    if state[_INDEX["exact_duplicate"]] >= 1.0:
        return (0.0, 1.0, 0.0)
    same_scope = state[_INDEX["other_scope"]] < 1.0
    update = (
        merge_allowed
        and same_scope
        and state[_INDEX["closest"]] >= MERGE_FLOOR
        and state[_INDEX["incompatible"]] >= MERGE_MIN_INCOMPATIBLE
        and state[_INDEX["new_marks"]] >= 1.0
        and state[_INDEX["kept_marks"]] > 0.0
        and state[_INDEX["change_words"]] >= 1.0
        and state[_INDEX["contested"]] < 1.0
    )
    noop = (
        state[_INDEX["closest"]] >= NOOP_FLOOR
        and same_scope
        and state[_INDEX["new_marks"]] < 1.0
        and state[_INDEX["change_words"]] < 1.0
        and (
            state[_INDEX["restates"]] >= 1.0
            or state[_INDEX["incompatible"]] < NOOP_MAX_INCOMPATIBLE
            or (state[_INDEX["kept_marks"]] >= 1.0 and state[_INDEX["in_conflict"]] < 1.0)
        )
    )
    return (1.0, 1.0 if noop else 0.0, 1.0 if update else 0.0)


def entropy(p: Vector) -> float:
    """Mean entropy of rows of probabilities (nats), for training reports."""
    safe = np.clip(p, 1e-12, 1.0)
    return float(-(p * np.log(safe)).sum(axis=-1).mean()) if len(p) else math.nan
