"""What a Layer 2 decision earned, and what the action not taken would have (ADR-020).

A decision's **outcome** is read from the database after a horizon: the useful and not-useful
ratings (``memory_feedback``) of the record it admitted, and how many of those useful ratings
were *redundant*, that is, given by the same agent, within seconds, to the admitting decision's
nearest record too (the same search found the answer twice). The reward of each action is
then defined on quantities that are observed whichever action was logged, or estimated:

* ``R(ADD)    = unique - NOT_USEFUL_COST * not_useful - STORE_COST``
* ``R(NOOP)   = - LOSS_WEIGHT * unique``
* ``R(UPDATE) = R(ADD) + NOT_USEFUL_COST * nearest_stale - LOSS_WEIGHT * nearest_lost``

where ``unique = useful - redundant``: usefulness only the admitted record brought. A record
that answers nothing costs its place in the store (and in every later result list); a NOOP
costs whatever unique answers the record would have given. An UPDATE keeps the proposal's
content (as the nearest record's next version) and takes the nearest record's old content
out of every later search: it saves each later "not useful" rating of the nearest record
(``nearest_stale``: it was stale, and crowded a result list) and loses each useful answer only
the nearest record gave (``nearest_lost``: rated useful with the admitted record not rated
useful in the same search). It pays the store cost like an ADD, so merging is never worth
anything by itself: only a nearest record observed stale and never observed uniquely useful
makes it better than an ADD.

For a logged ADD every reward is computed from its outcome. For a logged NOOP the record was
never stored, so ``unique`` and ``not_useful`` are estimated by :class:`RewardModel`, a ridge
regression over the state fitted on the logged ADDs (not on merges: a merged record inherits
the search traffic of the record it joined), with one structural fact: a duplicate
(exact, or near with the same words) can bring nothing unique; the nearest record's ratings
are not used (the Gate never allows an UPDATE where it allows a NOOP, but for an exact
duplicate, where it allows only a NOOP). For a logged UPDATE the merged record's ratings are
its outcome and the nearest record's old content is gone, so ``R(UPDATE)`` is observed with
nothing saved or lost, and the other two are estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES
from engram.memory.rl.policy import ACTIONS

Vector = npt.NDArray[np.float64]

#: What keeping a record that no one finds useful costs, in useful ratings.
STORE_COST = 0.2
#: A rating "not useful" of the admitted record (it crowded a result list).
NOT_USEFUL_COST = 0.25
#: A unique useful answer lost by not storing the record weighs more than one gained: losing a
#: fact an agent told is the error users notice.
LOSS_WEIGHT = 1.5
#: Ridge penalty of the reward model.
RIDGE = 1.0

_EXACT = FEATURE_NAMES.index("exact_duplicate")
_NEAR = FEATURE_NAMES.index("near_duplicate")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to the record a decision admitted (zeros for a NOOP: nothing admitted)."""

    useful: int = 0
    redundant: int = 0
    not_useful: int = 0
    #: ratings of the decision's nearest record after it: "not useful" ones, and useful ones
    #: the admitted record did not share (zeros when there is no nearest record)
    nearest_stale: int = 0
    nearest_lost: int = 0

    @property
    def unique(self) -> float:
        return float(max(0, self.useful - self.redundant))


@dataclass(frozen=True, slots=True)
class TrainingExample:
    """One logged decision: the state the advisor saw, the action taken, the reference
    (heuristic) action in that state, and the outcome."""

    state: tuple[float, ...]
    action: str  # one of ACTIONS
    reference: str
    outcome: Outcome = Outcome()
    #: whether the access rules let the write merge into its nearest record (the Gate's
    #: ``merge_allowed``; the state vector cannot say whose the record is)
    merge_allowed: bool = True


def rewards(
    unique: float, not_useful: float, nearest_stale: float = 0.0, nearest_lost: float = 0.0
) -> tuple[float, float, float]:
    """``(R(ADD), R(NOOP), R(UPDATE))`` for the documented reward."""
    add = unique - NOT_USEFUL_COST * not_useful - STORE_COST
    merged = add + NOT_USEFUL_COST * nearest_stale - LOSS_WEIGHT * nearest_lost
    return (add, -LOSS_WEIGHT * unique, merged)


class RewardModel:
    """Estimates ``unique`` and ``not_useful`` of a record from the state, for the decisions
    whose record was never stored (ridge regression on the logged ADDs)."""

    def __init__(self, unique: Vector, not_useful: Vector) -> None:
        self._unique = unique
        self._not_useful = not_useful

    @classmethod
    def fit(cls, examples: Sequence[TrainingExample]) -> RewardModel:
        added = [e for e in examples if e.action == "ADD"]
        if not added:
            zero = np.zeros(FEATURE_COUNT + 1)
            return cls(zero, zero)
        x = _design(np.asarray([e.state for e in added], dtype=np.float64))
        penalty = RIDGE * np.eye(x.shape[1])
        penalty[-1, -1] = 0.0  # the intercept is not shrunk
        gram = x.T @ x + penalty

        def solve(y: list[float]) -> Vector:
            return np.asarray(
                np.linalg.solve(gram, x.T @ np.asarray(y, dtype=np.float64)), dtype=np.float64
            )

        return cls(
            solve([e.outcome.unique for e in added]),
            solve([float(e.outcome.not_useful) for e in added]),
        )

    def estimate(self, states: Vector) -> tuple[Vector, Vector]:
        """``(unique, not_useful)`` for each state, never negative; zero unique for duplicates."""
        x = _design(states)
        unique = np.clip(x @ self._unique, 0.0, None)
        unique = np.where((states[:, _EXACT] >= 1.0) | (states[:, _NEAR] >= 1.0), 0.0, unique)
        return unique, np.clip(x @ self._not_useful, 0.0, None)


def _design(states: Vector) -> Vector:
    return np.hstack([states, np.ones((len(states), 1))])


def reward_table(examples: Sequence[TrainingExample], model: RewardModel) -> Vector:
    """(n, actions) rewards in the order of :data:`~engram.memory.rl.policy.ACTIONS`:
    observed for the logged action, estimated for the rest (see the module docstring)."""
    if not examples:
        return np.zeros((0, len(ACTIONS)))
    states = np.asarray([e.state for e in examples], dtype=np.float64)
    est_unique, est_not_useful = model.estimate(states)
    table = np.zeros((len(examples), len(ACTIONS)))
    for i, example in enumerate(examples):
        outcome = example.outcome
        if example.action == "ADD":
            row = rewards(
                outcome.unique,
                float(outcome.not_useful),
                float(outcome.nearest_stale),
                float(outcome.nearest_lost),
            )
        else:
            row = rewards(float(est_unique[i]), float(est_not_useful[i]))
            if example.action == "UPDATE":
                observed = rewards(outcome.unique, float(outcome.not_useful))
                row = (row[0], row[1], observed[2])
        table[i] = row
    return table
