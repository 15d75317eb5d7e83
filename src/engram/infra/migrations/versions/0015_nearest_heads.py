"""The Gate's neighbour search uses the HNSW index whatever the store's size.

Below about 2,000 records PostgreSQL's planner judged an exact scan (every current record of
the type, sorted by distance) cheaper than the HNSW index, and it also chose it while the
table had no statistics yet, as on every new store until autovacuum's first ANALYZE. The
scan's cost grows with the store: 9 ms at 1,000 records with the vectors out of line, 2 ms in
the row (migration 0014), against about 1 ms for the index, and it was paid on every write
(ADR-016, 2026-11-26). ``engram.nearest_heads`` runs the neighbour query with plans that
scan the table or sort by distance disabled, so the planner takes the index; its search path
is fixed, and it runs with its caller's rights (the runtime role reads nothing more than it
could read directly).

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
        """
        CREATE FUNCTION engram.nearest_heads(
            query public.vector, in_namespace text, in_type text, levels text[], how_many integer
        ) RETURNS SETOF engram.memories
        LANGUAGE sql STABLE
        SET search_path = engram, public
        SET enable_seqscan = off
        SET enable_sort = off
        AS $$
            SELECT * FROM engram.memories
            WHERE namespace = in_namespace AND type = in_type AND superseded_by IS NULL
              AND status = 'active' AND embedding IS NOT NULL AND access_level = ANY (levels)
            ORDER BY embedding <=> query
            LIMIT how_many
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION engram.nearest_heads FROM PUBLIC")
    op.execute("GRANT EXECUTE ON FUNCTION engram.nearest_heads TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP FUNCTION engram.nearest_heads")
    op.execute("RESET ROLE")
