"""Group Relative Policy Optimisation of the advisor's policy (ADR-020).

For every logged state the current policy samples a *group* of actions; each is scored by the
reward table of :mod:`engram.memory.rl.reward` (observed or estimated); a sample's advantage
is its reward minus the group's mean, over the group's standard deviation, so no value
function is learned; the policy takes clipped policy-gradient steps on those advantages
(PPO's ratio clip against the policy that sampled) with a KL penalty that keeps it near the
reference policy, the heuristic's decisions smoothed. It starts from the reference itself
(a few steps of imitation), so with flat rewards it stays the heuristic.

The policy is linear in the state, so every gradient is written out here in NumPy: 10,000
decisions train in seconds on a CPU, no GPU, no network.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engram.memory.rl.policy import ACTIONS, AdvisorPolicy, entropy, softmax

Vector = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class GRPOConfig:
    """Hyper-parameters (the reasons are in ADR-020)."""

    group_size: int = 8
    epochs: int = 40
    inner_steps: int = 4
    learning_rate: float = 0.05
    clip: float = 0.2
    kl_weight: float = 0.05
    reference_smoothing: float = 0.05
    imitation_steps: int = 200
    minibatch: int = 1024
    seed: int = 20261125


@dataclass(frozen=True, slots=True)
class TrainResult:
    """A trained policy and how training went."""

    policy: AdvisorPolicy
    states: int
    epochs: int
    seconds: float
    #: expected reward of the policy over the training states, before training and per epoch
    reward_curve: tuple[float, ...]
    reference_reward: float
    kl_to_reference: float
    agreement_with_reference: float
    entropy: float
    config: GRPOConfig = field(default_factory=GRPOConfig)

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.policy.version,
            "digest": self.policy.digest(),
            "states": self.states,
            "epochs": self.epochs,
            "seconds": round(self.seconds, 3),
            "reward_curve": [round(r, 5) for r in self.reward_curve],
            "reference_reward": round(self.reference_reward, 5),
            "kl_to_reference": round(self.kl_to_reference, 5),
            "agreement_with_reference": round(self.agreement_with_reference, 5),
            "entropy": round(self.entropy, 5),
        }


class _Adam:
    def __init__(self, rate: float, shapes: list[tuple[int, ...]]) -> None:
        self._rate = rate
        self._m = [np.zeros(s) for s in shapes]
        self._v = [np.zeros(s) for s in shapes]
        self._t = 0

    def ascend(self, params: list[Vector], grads: list[Vector]) -> None:
        self._t += 1
        for i, grad in enumerate(grads):
            self._m[i] = 0.9 * self._m[i] + 0.1 * grad
            self._v[i] = 0.999 * self._v[i] + 0.001 * grad * grad
            m_hat = self._m[i] / (1 - 0.9**self._t)
            v_hat = self._v[i] / (1 - 0.999**self._t)
            params[i] += self._rate * m_hat / (np.sqrt(v_hat) + 1e-8)  # in place


def reference_distribution(reference: Vector, allowed: Vector, smoothing: float) -> Vector:
    """The heuristic's one-hot actions smoothed over the allowed actions."""
    counts = allowed.sum(axis=1, keepdims=True)
    spread = np.where(counts > 1, smoothing / np.maximum(counts - 1, 1), 0.0)
    ref = np.where(reference > 0, 1.0 - np.where(counts > 1, smoothing, 0.0), spread) * allowed
    total = ref.sum(axis=1, keepdims=True)
    # a reference action the Gate does not allow here: the allowed ones, evenly
    return np.where(total > 0, ref / np.maximum(total, 1e-12), allowed / counts)  # type: ignore[no-any-return]


def _kl(p: Vector, q: Vector) -> Vector:
    safe_p, safe_q = np.clip(p, 1e-12, 1.0), np.clip(q, 1e-12, 1.0)
    return (p * (np.log(safe_p) - np.log(safe_q))).sum(axis=1)  # type: ignore[no-any-return]


def train_grpo(
    states: Vector,
    allowed: Vector,
    reward: Vector,
    reference: Vector,
    *,
    version: str,
    config: GRPOConfig | None = None,
) -> TrainResult:
    """Train a policy on ``states`` (n, features) with per-action ``reward`` (n, actions),
    the actions ``allowed`` in each state (n, actions; 0/1) and the ``reference`` actions
    (n, actions; one-hot)."""
    cfg = config or GRPOConfig()
    started = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    n = len(states)
    policy_w = np.zeros((len(ACTIONS), states.shape[1]))
    policy_b = np.zeros(len(ACTIONS))
    ref = reference_distribution(reference, allowed, cfg.reference_smoothing)

    def probs(w: Vector, b: Vector, rows: Vector, mask: Vector) -> Vector:
        return softmax(rows @ w.T + b, mask)

    # 1. start from the reference: imitation by cross-entropy against its distribution
    adam = _Adam(cfg.learning_rate, [policy_w.shape, policy_b.shape])
    for _ in range(cfg.imitation_steps if n else 0):
        p = probs(policy_w, policy_b, states, allowed)
        grad_z = (ref - p) / n
        adam.ascend([policy_w, policy_b], [grad_z.T @ states, grad_z.sum(axis=0)])

    def expected_reward(w: Vector, b: Vector) -> float:
        return float((probs(w, b, states, allowed) * reward).sum(axis=1).mean()) if n else 0.0

    curve = [expected_reward(policy_w, policy_b)]
    adam = _Adam(cfg.learning_rate, [policy_w.shape, policy_b.shape])
    k = len(ACTIONS)
    for _ in range(cfg.epochs if n else 0):
        order = rng.permutation(n)
        for start in range(0, n, cfg.minibatch):
            rows = order[start : start + cfg.minibatch]
            x, mask, r, q = states[rows], allowed[rows], reward[rows], ref[rows]
            old = probs(policy_w, policy_b, x, mask)
            # 2. a group of actions per state from the sampling policy, scored
            cumulative = old.cumsum(axis=1)
            draws = rng.random((len(rows), cfg.group_size, 1))
            sampled = np.minimum((draws > cumulative[:, None, :]).sum(axis=2), k - 1)
            # rounding may land a draw on a masked action: take the likeliest allowed one
            possible = np.take_along_axis(old, sampled, axis=1) > 0
            sampled = np.where(possible, sampled, old.argmax(axis=1)[:, None])
            scores = np.take_along_axis(r, sampled, axis=1)
            spread = scores.std(axis=1, keepdims=True)
            advantage = np.where(
                spread > 1e-9, (scores - scores.mean(axis=1, keepdims=True)) / (spread + 1e-6), 0.0
            )
            onehots = np.eye(k)[sampled]  # (m, G, k)
            old_taken = np.take_along_axis(old, sampled, axis=1)
            for _step in range(cfg.inner_steps):
                p = probs(policy_w, policy_b, x, mask)
                taken = np.take_along_axis(p, sampled, axis=1)
                ratio = taken / np.maximum(old_taken, 1e-12)
                clipped = ((advantage > 0) & (ratio > 1 + cfg.clip)) | (
                    (advantage < 0) & (ratio < 1 - cfg.clip)
                )
                weight = np.where(clipped, 0.0, ratio * advantage) / cfg.group_size
                # d(ratio * A)/dz = ratio * A * (onehot(a) - p)
                grad_z = (weight[:, :, None] * (onehots - p[:, None, :])).sum(axis=1)
                # minus the KL penalty's gradient: d KL(p||q)/dz = p * (log p - log q - KL)
                log_ratio = np.log(np.clip(p, 1e-12, 1)) - np.log(np.clip(q, 1e-12, 1))
                log_ratio = np.where(mask > 0, log_ratio, 0.0)
                kl = (p * log_ratio).sum(axis=1, keepdims=True)
                grad_z -= cfg.kl_weight * p * (log_ratio - kl)
                grad_z /= len(rows)
                adam.ascend([policy_w, policy_b], [grad_z.T @ x, grad_z.sum(axis=0)])
        curve.append(expected_reward(policy_w, policy_b))

    policy = AdvisorPolicy(version, policy_w, policy_b)
    final = probs(policy_w, policy_b, states, allowed) if n else np.zeros((0, k))
    reference_reward = float((ref * reward).sum(axis=1).mean()) if n else 0.0
    agreement = float((final.argmax(axis=1) == reference.argmax(axis=1)).mean()) if n else 1.0
    return TrainResult(
        policy=policy,
        states=n,
        epochs=cfg.epochs,
        seconds=time.perf_counter() - started,
        reward_curve=tuple(curve),
        reference_reward=reference_reward,
        kl_to_reference=float(_kl(final, ref).mean()) if n else 0.0,
        agreement_with_reference=agreement,
        entropy=entropy(final) if n else 0.0,
        config=cfg,
    )
