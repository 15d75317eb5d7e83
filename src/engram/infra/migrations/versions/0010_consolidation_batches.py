"""Consolidation batches: what each committed batch created and consumed, and its rollback.

One row per batch, inserted in the batch's own transaction (with its records, edges and audit
rows), so a batch that rolled back leaves no row. ``items`` lists, per consolidated record, the
action, the new record and the source versions it consumed (a GIN index finds the items of a
source, which are undone when an agent forgets or changes it); ``decision_ids`` the Gate
decisions of the batch. A rollback sets ``rolled_back_at`` and its own decisions, once. A
partial index finds the fast-path heads consolidation reads.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.consolidation_batches (
            id                    uuid PRIMARY KEY,
            run_id                uuid NOT NULL,
            trigger               text NOT NULL,
            created_at            timestamptz NOT NULL DEFAULT now(),
            items                 jsonb NOT NULL,
            skipped               jsonb NOT NULL DEFAULT '{}'::jsonb,
            decision_ids          uuid[] NOT NULL,
            rolled_back_at        timestamptz,
            rollback_decision_ids uuid[],
            CONSTRAINT consolidation_batches_trigger_check CHECK (trigger IN
                ('scheduled_deep', 'scheduled_light', 'event_driven', 'pressure_driven'))
        )
        """
    )
    op.execute(
        "CREATE INDEX consolidation_batches_created_idx "
        "ON engram.consolidation_batches (created_at DESC)"
    )
    op.execute(
        "CREATE INDEX consolidation_batches_items_idx "
        "ON engram.consolidation_batches USING gin (items jsonb_path_ops)"
    )
    op.execute(
        "CREATE INDEX memories_fast_path_idx ON engram.memories (ingestion_time) "
        "WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'"
    )
    op.execute("REVOKE ALL ON engram.consolidation_batches FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.consolidation_batches TO engram_runtime")
    op.execute(
        "GRANT UPDATE (rolled_back_at, rollback_decision_ids) "
        "ON engram.consolidation_batches TO engram_runtime"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.memories_fast_path_idx")
    op.execute("DROP TABLE engram.consolidation_batches")
    op.execute("RESET ROLE")
