"""The exact-duplicate lookup reads its answer straight from one index.

The Gate asks, on every write, for the oldest live head of one namespace and type with the
new record's content hash. The hash index (0003) had no ingestion time, so the lookup's
``ORDER BY ingestion_time`` could also be served by ``memories_heads_by_type_idx`` (0005),
read backwards and filtered row by row. On a table without statistics (a new store, until
autovacuum's first ANALYZE) the planner took that index: 0.9 ms at 1,000 records, growing
with the store, on every write (ADR-016, amendment "a new record in one statement"). With
the ingestion time appended to the hash index, its three equality columns also give the
order, and the lookup reads one entry (0.01 ms) with or without statistics.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "CREATE INDEX memories_head_hash_time_idx ON engram.memories "
        "(namespace, type, content_hash, ingestion_time) WHERE superseded_by IS NULL"
    )
    op.execute("DROP INDEX engram.memories_head_hash_idx")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "CREATE INDEX memories_head_hash_idx ON engram.memories (namespace, type, content_hash) "
        "WHERE superseded_by IS NULL"
    )
    op.execute("DROP INDEX engram.memories_head_hash_time_idx")
    op.execute("RESET ROLE")
