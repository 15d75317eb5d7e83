"""The append-only audit log: one hash-chained row per Gate decision, sealed checkpoints over
every lane, verification, and the live set rebuilt from the log alone (ADR-005, ADR-014)."""

from engram.memory.audit.log import AuditEntry, AuditLog, VerifyReport, canonical_json

__all__ = ["AuditEntry", "AuditLog", "VerifyReport", "canonical_json"]
