"""Infrastructure: Protocols (``db``, ``embeddings``, ``graph``, ``events``) and the adapters
that implement them. Only :mod:`engram.kernel` imports the implementations."""
