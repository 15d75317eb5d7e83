"""The HTTP server: health, readiness and metrics (and, later, the REST API)."""
