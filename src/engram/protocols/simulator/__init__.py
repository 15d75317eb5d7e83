"""A simulated agent that lives a seeded life against a real kernel, for judging Gate advisors
(ADR-020)."""
