"""Each access level's event-driven consolidation is watched from its own mark.

The event trigger counts the records written since the last event-driven pass. Passes now
read only the access levels whose topics grew (ADR-019's amendment), so "the last pass" is
per level: ``consolidation_marks`` keeps, for each level, the instant its last scheduled
event-driven pass looked up to. A level without a row falls back to the job's cursor (what
every level shared before this revision).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_LEVELS = "'public', 'agent', 'user', 'system', 'sensitive'"


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        f"""
        CREATE TABLE engram.consolidation_marks (
            access_level text PRIMARY KEY CHECK (access_level IN ({_LEVELS})),
            passed_at    timestamptz NOT NULL
        )
        """
    )
    op.execute("GRANT SELECT, INSERT, UPDATE ON engram.consolidation_marks TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.consolidation_marks")
    op.execute("RESET ROLE")
