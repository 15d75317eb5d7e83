"""The memory subsystem: types, the Librarian Gate, temporal engine, conflicts, consolidation."""
