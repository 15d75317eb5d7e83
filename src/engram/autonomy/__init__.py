"""Scheduled, event and pressure triggers, and self-healing jobs."""
