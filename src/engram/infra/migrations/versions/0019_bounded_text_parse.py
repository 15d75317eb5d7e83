"""The full-text column parses long runs without spaces in pieces.

PostgreSQL's text-search parser takes time that grows with the square of a run of characters
without a space that it tries to read as a file name or a host (``a_a_a_…``, ``1_2_1_2…``):
16,000 such characters cost about 1.6 s of the server's CPU on every version written (hostile
pass R). ``content_tsv`` now parses the content with a space put after every 255 characters of
such a run. No ordinary word, path or URL is that long, so their lexemes are as before; a
crafted run costs about 40 ms. Queries split their text the same way
(``engram/retrieval/sql/search.sql``), so the two sides agree.

The expression of a generated column is changed in place on PostgreSQL 17 and later; an older
server gets the column (and its index) dropped and added again. Either way the table is
rewritten, which takes a lock on ``memories`` for as long as the rewrite runs.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


_BOUNDED = r"to_tsvector('english'::regconfig, regexp_replace(content, '(\S{255})', '\1 ', 'g'))"
_PLAIN = "to_tsvector('english'::regconfig, content)"
#: The first server version that changes a generated column's expression in place.
_SET_EXPRESSION = 170000


def _compute_with(expression: str) -> None:
    op.execute("SET ROLE engram_owner")
    version = int(op.get_bind().execute(text("SHOW server_version_num")).scalar_one())
    if version >= _SET_EXPRESSION:
        op.execute(
            f"ALTER TABLE engram.memories ALTER COLUMN content_tsv SET EXPRESSION AS ({expression})"
        )
    else:
        op.execute("ALTER TABLE engram.memories DROP COLUMN content_tsv")
        op.execute(
            "ALTER TABLE engram.memories ADD COLUMN content_tsv tsvector "
            f"GENERATED ALWAYS AS ({expression}) STORED"
        )
        op.execute(
            "CREATE INDEX memories_content_tsv_idx ON engram.memories USING gin (content_tsv)"
        )
    op.execute("RESET ROLE")


def upgrade() -> None:
    _compute_with(_BOUNDED)


def downgrade() -> None:
    _compute_with(_PLAIN)
