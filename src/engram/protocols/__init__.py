"""Protocol adapters (HTTP, MCP, CLI): authenticate, set decision_type, translate results."""
