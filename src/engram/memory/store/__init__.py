"""The version store: the rows of ``engram.memories`` and ``engram.memory_edges``.

Reads and writes of versions the Gate makes inside its transactions, and nothing else: no
decision is taken here. Statements live in ``versions.sql``; its ``record_columns`` fragment is
the one column list the other packages' statements include (``FRAGMENTS``).
"""

from engram.memory.store.versions import (
    FRAGMENTS,
    SQL,
    NewEdge,
    add_edge,
    add_edges,
    candidates,
    cite,
    close_head,
    count_heads,
    edge_arrays,
    exact_duplicate,
    fill_embedding,
    forget_head,
    head,
    insert_refused,
    insert_version,
    record_from_row,
    reinforce,
    resolve_evidence,
    standing,
    stored_embedding,
    unembedded_heads,
    version_by_id,
    version_chain,
    version_row,
)

__all__ = [
    "FRAGMENTS",
    "SQL",
    "NewEdge",
    "add_edge",
    "add_edges",
    "candidates",
    "cite",
    "close_head",
    "count_heads",
    "edge_arrays",
    "exact_duplicate",
    "fill_embedding",
    "forget_head",
    "head",
    "insert_refused",
    "insert_version",
    "record_from_row",
    "reinforce",
    "resolve_evidence",
    "standing",
    "stored_embedding",
    "unembedded_heads",
    "version_by_id",
    "version_chain",
    "version_row",
]
