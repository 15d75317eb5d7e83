"""Delivery of escalations (conflicts a person must decide) to sinks."""
