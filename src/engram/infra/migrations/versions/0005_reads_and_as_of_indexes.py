"""Read statistics per record, and the index that serves as-of listings.

Reads are counted in their own table, not on the version rows: a read must never rewrite a
version (nor churn its vector and text indexes), and the counters belong to the record, not
to one of its versions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.memory_access (
            record_id        uuid PRIMARY KEY,
            access_count     bigint NOT NULL DEFAULT 0,
            last_accessed_at timestamptz NOT NULL,
            period_start     date NOT NULL,
            period_count     integer NOT NULL DEFAULT 0,
            reinforcements   double precision NOT NULL DEFAULT 0,
            CONSTRAINT memory_access_count_check CHECK (access_count >= 0),
            CONSTRAINT memory_access_period_check CHECK (period_count >= 0),
            CONSTRAINT memory_access_reinforcements_check CHECK (reinforcements >= 0)
        )
        """
    )
    # Heads of one type and namespace, newest change first: the outer scan of as-of listings.
    op.execute(
        "CREATE INDEX memories_heads_by_type_idx ON engram.memories "
        "(namespace, type, ingestion_time DESC) WHERE superseded_by IS NULL"
    )
    # Versions of one type by event time: listings of what was true at an instant E.
    op.execute(
        "CREATE INDEX memories_event_listing_idx ON engram.memories "
        "(namespace, type, event_time DESC)"
    )
    op.execute("REVOKE ALL ON engram.memory_access FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT, UPDATE ON engram.memory_access TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.memories_event_listing_idx")
    op.execute("DROP INDEX engram.memories_heads_by_type_idx")
    op.execute("DROP TABLE engram.memory_access")
    op.execute("RESET ROLE")
