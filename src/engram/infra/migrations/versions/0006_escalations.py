"""The admin queue of escalations: conflicts a person must decide.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.escalations (
            id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind            text NOT NULL,
            record_id       uuid NOT NULL,
            dedupe_key      text NOT NULL,
            payload         jsonb NOT NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            acknowledged_at timestamptz,
            acknowledged_by text,
            CONSTRAINT escalations_dedupe_key UNIQUE (dedupe_key),
            CONSTRAINT escalations_kind_check CHECK (kind ~ '^[a-z_]+\\.[a-z_]+$')
        )
        """
    )
    op.execute(
        "CREATE INDEX escalations_open_idx ON engram.escalations (created_at) "
        "WHERE acknowledged_at IS NULL"
    )
    op.execute("REVOKE ALL ON engram.escalations FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.escalations TO engram_runtime")
    op.execute(
        "GRANT UPDATE (acknowledged_at, acknowledged_by) ON engram.escalations TO engram_runtime"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.escalations")
    op.execute("RESET ROLE")
