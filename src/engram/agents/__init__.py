"""The registry of agents: hashed tokens, trust levels and permissions (see ADR-011)."""
