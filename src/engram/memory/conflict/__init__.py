"""Conflict detection between a new record and existing ones: lexical cues plus the embedding
similarity the Gate already has (ADR-010). Pure: no I/O."""

from engram.memory.conflict.detection import (
    ConflictResolver,
    ConflictResult,
    SubjectConflictDetector,
)

__all__ = ["ConflictResolver", "ConflictResult", "SubjectConflictDetector"]
