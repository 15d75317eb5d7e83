"""An ordinary version row keeps its content and full-text column in the row.

A version of a 20-60 word record is about 2.5 kB: the 1,536 bytes of its embedding (stored
plain, never moved out), the content, its ``content_tsv`` and the rest. PostgreSQL moves
columns out of a row longer than ``toast_tuple_target`` (2 kB by default), the largest
first, so nearly every version had its ``content_tsv`` and its content in the TOAST table
(two chunks a version: 73 MB beside a 205 MB table at 100,000 records). Every read of those
columns fetched them from there again, once per use: the search's vector leg tests each of
the query's words against a candidate's ``content_tsv`` (nine words, forty candidates: 360
fetches, about 1,400 buffers a search), and hydration and the Gate's neighbour read fetch the
content. With the target at 4,080 bytes (two such rows fit a page) a version up to that size
stays whole in its row: at 100,000 records the vector leg's median fell from 2.7 to 1.2-1.9
ms, and the table took 273 MB with no TOAST against 278 MB before (ADR-016, amendment of
2026-11-28, fifth). Longer records (the limit is 16,000 characters of content and 16 kB of
metadata) are still moved out as before.

The setting applies to rows written from now on; rows already stored move into their rows
as they are rewritten (a new version, a status change) or all at once with
``VACUUM FULL engram.memories``, which locks the table while it runs (docs/operations.md).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: Bytes a row may take before PostgreSQL moves its largest columns out (at most 8,160).
ROW_TARGET = 4080


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(f"ALTER TABLE engram.memories SET (toast_tuple_target = {ROW_TARGET})")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.memories RESET (toast_tuple_target)")
    op.execute("RESET ROLE")
