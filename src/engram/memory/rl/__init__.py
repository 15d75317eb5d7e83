"""The advisor's learning: the state Layer 2 saw, the policy, the reward and GRPO (ADR-020).

Pure NumPy, no database: :mod:`engram.memory.gate.learned` scores a policy in the Gate, and
the data a policy is trained on comes from the audit log joined to feedback.
"""
