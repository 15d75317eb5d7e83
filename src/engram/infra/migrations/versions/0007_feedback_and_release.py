"""Retrieval feedback, and quarantine release as an audited admin action.

``memory_feedback`` keeps every usefulness rating an agent gives a retrieved record (the reward
signal of the advisor, and an input to decay). The audit table learns one more action,
``RELEASE``: an admin lifting the quarantine of a record, with outcome ``released``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.memory_feedback (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            record_id  uuid NOT NULL,
            version_id uuid NOT NULL REFERENCES engram.memories (id),
            agent_id   text NOT NULL,
            useful     boolean NOT NULL,
            signal     text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT memory_feedback_signal_check CHECK (signal ~ '^[a-z_]{1,32}$')
        )
        """
    )
    op.execute(
        "CREATE INDEX memory_feedback_record_idx ON engram.memory_feedback (record_id, created_at)"
    )
    op.execute("REVOKE ALL ON engram.memory_feedback FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.memory_feedback TO engram_runtime")
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_action_check, "
        "ADD CONSTRAINT librarian_audit_action_check "
        "CHECK (action IN ('CREATE', 'UPDATE', 'FORGET', 'RELEASE'))"
    )
    # The quarantine listing: heads the PII check holds at sensitive.
    op.execute(
        "CREATE INDEX memories_quarantine_idx ON engram.memories (ingestion_time) "
        "WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'"
    )
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_outcome_check, "
        "ADD CONSTRAINT librarian_audit_outcome_check "
        "CHECK (outcome IN ('created', 'updated', 'forgotten', 'reinforced', 'released', 'none'))"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.memories_quarantine_idx")
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_outcome_check, "
        "ADD CONSTRAINT librarian_audit_outcome_check "
        "CHECK (outcome IN ('created', 'updated', 'forgotten', 'reinforced', 'none')) NOT VALID"
    )
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_action_check, "
        "ADD CONSTRAINT librarian_audit_action_check "
        "CHECK (action IN ('CREATE', 'UPDATE', 'FORGET')) NOT VALID"
    )
    op.execute("DROP TABLE engram.memory_feedback")
    op.execute("RESET ROLE")
