"""The advisor's learning (ADR-020): the state Layer 2 saw (``features``), the policy
(``policy``), the reward and its counterfactual estimate (``reward``), GRPO (``grpo``,
``training``), the training data read from the audit log and feedback (``decisions``), the
model rows (``models``) and one training run (``runs``). The Gate scores a policy in
:mod:`engram.memory.gate.learned`; the learning itself is NumPy, on the CPU.
"""
