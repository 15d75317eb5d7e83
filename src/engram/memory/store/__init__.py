"""The version store: the rows of ``engram.memories`` and ``engram.memory_edges``.

Reads and writes of versions the Gate makes inside its transactions, and nothing else: no
decision is taken here. Statements live in ``versions.sql``; its ``record_columns`` fragment is
the one column list the other packages' statements include (``FRAGMENTS``).
"""

from engram.memory.store.versions import (
    FRAGMENTS,
    SQL,
    add_edge,
    add_related,
    candidates,
    close_head,
    count_heads,
    exact_duplicate,
    fill_embedding,
    forget_head,
    head,
    insert_version,
    record_from_row,
    reinforce,
    resolve_evidence,
    standing,
    stored_embedding,
    unembedded_heads,
    version_by_id,
    version_chain,
)

__all__ = [
    "FRAGMENTS",
    "SQL",
    "add_edge",
    "add_related",
    "candidates",
    "close_head",
    "count_heads",
    "exact_duplicate",
    "fill_embedding",
    "forget_head",
    "head",
    "insert_version",
    "record_from_row",
    "reinforce",
    "resolve_evidence",
    "standing",
    "stored_embedding",
    "unembedded_heads",
    "version_by_id",
    "version_chain",
]
