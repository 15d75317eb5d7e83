"""The append-only audit table of Gate decisions.

The runtime role may INSERT and SELECT only; triggers refuse UPDATE, DELETE and TRUNCATE
for everyone else as a second wall (the owner can still disable them, which the tamper
evidence added by later revisions detects).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.librarian_audit (
            seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            decision_id     uuid NOT NULL,
            request_id      text,
            occurred_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
            action          text NOT NULL,
            decision        text NOT NULL,
            decision_type   text NOT NULL,
            reason          text NOT NULL,
            agent_id        text NOT NULL,
            caller          jsonb NOT NULL,
            record_id       uuid,
            version_id      uuid,
            input_snapshot  jsonb NOT NULL,
            layer1_checks   jsonb NOT NULL DEFAULT '[]'::jsonb,
            layer2_decision jsonb,
            decision_source text NOT NULL,
            duration_ms     double precision,
            CONSTRAINT librarian_audit_decision_id_key UNIQUE (decision_id),
            CONSTRAINT librarian_audit_request_id_key UNIQUE (request_id),
            CONSTRAINT librarian_audit_action_check
                CHECK (action IN ('CREATE', 'UPDATE', 'FORGET')),
            CONSTRAINT librarian_audit_decision_check
                CHECK (decision IN ('approved', 'rejected', 'conflict')),
            CONSTRAINT librarian_audit_decision_type_check
                CHECK (decision_type IN ('external', 'consolidation', 'self_healing'))
        )
        """
    )
    op.execute(
        "CREATE INDEX librarian_audit_occurred_at_idx ON engram.librarian_audit (occurred_at)"
    )
    op.execute(
        "CREATE INDEX librarian_audit_agent_idx ON engram.librarian_audit (agent_id, occurred_at)"
    )
    op.execute("CREATE INDEX librarian_audit_record_idx ON engram.librarian_audit (record_id)")
    op.execute(
        """
        CREATE FUNCTION engram.refuse_audit_change() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'librarian_audit is append-only: % refused', TG_OP
                USING ERRCODE = 'insufficient_privilege';
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER librarian_audit_no_update_delete
            BEFORE UPDATE OR DELETE ON engram.librarian_audit
            FOR EACH ROW EXECUTE FUNCTION engram.refuse_audit_change()
        """
    )
    op.execute(
        """
        CREATE TRIGGER librarian_audit_no_truncate
            BEFORE TRUNCATE ON engram.librarian_audit
            FOR EACH STATEMENT EXECUTE FUNCTION engram.refuse_audit_change()
        """
    )
    op.execute("REVOKE ALL ON engram.librarian_audit FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.librarian_audit TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.librarian_audit")
    op.execute("DROP FUNCTION engram.refuse_audit_change()")
    op.execute("RESET ROLE")
