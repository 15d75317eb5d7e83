"""Conflict judgement between a new record and existing ones (ADR-010, docs/gate.md): scope
rules, a trained classifier over lexical, quantity and embedding-similarity features, and the
documented rules that name the class. Pure but for the optional embedding port."""

from engram.memory.conflict.detection import (
    ConflictDetector,
    ConflictResolver,
    ConflictResult,
)

__all__ = ["ConflictDetector", "ConflictResolver", "ConflictResult"]
