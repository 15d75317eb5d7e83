"""What admins do with memory: the quarantine desk and audit replay (ADR-014)."""
