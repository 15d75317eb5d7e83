"""From logged decisions to a trained policy: the one entry point of training (ADR-020)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram.errors import ValidationFailed
from engram.memory.rl.features import FEATURE_COUNT
from engram.memory.rl.grpo import GRPOConfig, TrainResult, train_grpo
from engram.memory.rl.policy import ACTIONS, allowed_actions
from engram.memory.rl.reward import RewardModel, TrainingExample, reward_table


def train_policy(
    batch: Sequence[TrainingExample], *, version: str, config: GRPOConfig | None = None
) -> TrainResult:
    """Fit the reward model on ``batch``, then the policy by GRPO on the same states."""
    bad = [i for i, e in enumerate(batch) if len(e.state) != FEATURE_COUNT]
    if bad:
        found = len(batch[bad[0]].state)
        reason = f"{len(bad)} examples have {found} features, the schema has {FEATURE_COUNT}"
        raise ValidationFailed(errors=[reason])
    unknown = {a for e in batch for a in (e.action, e.reference)} - set(ACTIONS)
    if unknown:
        raise ValidationFailed(errors=[f"unknown actions {sorted(unknown)}"])
    states = np.asarray([e.state for e in batch], dtype=np.float64).reshape(-1, FEATURE_COUNT)
    masks = np.asarray(
        [allowed_actions(e.state, merge_allowed=e.merge_allowed) for e in batch]
    ).reshape(-1, len(ACTIONS))
    reference = np.zeros((len(batch), len(ACTIONS)))
    for i, example in enumerate(batch):
        reference[i, ACTIONS.index(example.reference)] = 1.0
    rewards = reward_table(batch, RewardModel.fit(batch))
    return train_grpo(states, masks, rewards, reference, version=version, config=config)
