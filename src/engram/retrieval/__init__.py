"""Hybrid retrieval and feedback; reads memory through engram.memory.types and .temporal."""
