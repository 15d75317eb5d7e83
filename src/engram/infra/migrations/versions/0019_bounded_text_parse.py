"""The full-text column parses long runs without spaces in pieces.

PostgreSQL's text-search parser takes time that grows with the square of a run of characters
without a space that it tries to read as a file name or a host (``a_a_a_…``, ``1_2_1_2…``):
16,000 such characters cost about 1.6 s of the server's CPU on every version written (hostile
pass R). ``content_tsv`` now parses the content with a space put after every 255 characters of
such a run. No ordinary word, path or URL is that long, so their lexemes are as before; a
crafted run costs about 40 ms. Queries split their text the same way
(``engram/retrieval/sql/search.sql``), so the two sides agree.

The expression of a generated column is changed in place (PostgreSQL 17 and later); the table
is rewritten, which takes a lock on ``memories`` for as long as the rewrite runs.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        r"""
        ALTER TABLE engram.memories ALTER COLUMN content_tsv SET EXPRESSION AS (
            to_tsvector('english'::regconfig, regexp_replace(content, '(\S{255})', '\1 ', 'g'))
        )
        """
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        ALTER TABLE engram.memories ALTER COLUMN content_tsv SET EXPRESSION AS (
            to_tsvector('english'::regconfig, content)
        )
        """
    )
    op.execute("RESET ROLE")
