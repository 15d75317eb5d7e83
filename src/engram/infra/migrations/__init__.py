"""Alembic migrations of engram's schema (raw SQL, reversible, roles and grants included)."""
