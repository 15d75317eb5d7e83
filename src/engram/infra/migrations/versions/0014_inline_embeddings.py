"""Embeddings are stored in the row, not in the TOAST table.

pgvector's ``vector`` type is stored out of line by default (``EXTERNAL``). A record's row
with a 384-dimension vector (1,544 bytes) and a few hundred characters of content passes
PostgreSQL's TOAST threshold (about 2 KB), so the vector went to the TOAST table, and every
scan that computes a distance fetched it from there. On a small store the planner prefers an
exact scan to the HNSW index, and that scan took 9 ms for 1,000 records (the Gate's neighbour
query, on every write) instead of 2 ms with the vectors in the row (ADR-016, 2026-11-26).
``PLAIN`` keeps them in the row; content, metadata and the text-search vector stay
``EXTENDED`` and are moved out first, so a row still fits in a page.

``PLAIN`` never compresses or moves the vector, so a row must hold it whole: fine for 384
dimensions (1,544 bytes) and up to about 1,500; a model of 2,000 dimensions or more would
need ``MAIN`` instead. The setting applies to rows written from now on; rows already stored
keep their out-of-line vectors until they are rewritten (``VACUUM FULL engram.memories``
rewrites them all).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.memories ALTER COLUMN embedding SET STORAGE PLAIN")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.memories ALTER COLUMN embedding SET STORAGE EXTERNAL")
    op.execute("RESET ROLE")
