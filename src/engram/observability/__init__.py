"""Metrics, structured logging and health checks."""
