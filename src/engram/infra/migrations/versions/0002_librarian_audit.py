"""The append-only audit table of Gate decisions, hash-chained in lanes.

The runtime role may INSERT and SELECT only; triggers refuse UPDATE, DELETE and TRUNCATE
for everyone else as a second wall (the owner can still disable them, which the hash chain
detects). Rows are chained per lane: each row stores the hash of the previous row of its lane
and its own hash, and ``audit_chain_heads`` holds each lane's tip. Writers lock one lane row of
sixteen, so concurrent writes do not queue behind a single lock. The JSON columns are ``json``
(text kept exactly as written), so a verifier can recompute hashes from the stored bytes.

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
            occurred_at     timestamptz NOT NULL,
            action          text NOT NULL,
            decision        text NOT NULL,
            outcome         text NOT NULL,
            decision_type   text NOT NULL,
            reason          text NOT NULL,
            agent_id        text NOT NULL,
            caller          json NOT NULL,
            record_id       uuid,
            version_id      uuid,
            input_snapshot  json NOT NULL,
            layer1_checks   json NOT NULL,
            layer2_decision json,
            decision_source text NOT NULL,
            duration_ms     double precision NOT NULL,
            lane            smallint NOT NULL,
            prev_hash       bytea NOT NULL,
            row_hash        bytea NOT NULL,
            CONSTRAINT librarian_audit_decision_id_key UNIQUE (decision_id),
            CONSTRAINT librarian_audit_request_id_key UNIQUE (request_id),
            CONSTRAINT librarian_audit_action_check
                CHECK (action IN ('CREATE', 'UPDATE', 'FORGET')),
            CONSTRAINT librarian_audit_decision_check
                CHECK (decision IN ('approved', 'rejected', 'conflict')),
            CONSTRAINT librarian_audit_outcome_check
                CHECK (outcome IN ('created', 'updated', 'forgotten', 'reinforced', 'none')),
            CONSTRAINT librarian_audit_decision_type_check
                CHECK (decision_type IN ('external', 'consolidation', 'self_healing')),
            CONSTRAINT librarian_audit_lane_check CHECK (lane BETWEEN 0 AND 15),
            CONSTRAINT librarian_audit_hash_check
                CHECK (length(prev_hash) = 32 AND length(row_hash) = 32)
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
    op.execute("CREATE INDEX librarian_audit_lane_idx ON engram.librarian_audit (lane, seq)")
    op.execute(
        """
        CREATE TABLE engram.audit_chain_heads (
            lane      smallint PRIMARY KEY,
            last_seq  bigint,
            last_hash bytea NOT NULL,
            CONSTRAINT audit_chain_heads_lane_check CHECK (lane BETWEEN 0 AND 15),
            CONSTRAINT audit_chain_heads_hash_check CHECK (length(last_hash) = 32)
        )
        """
    )
    # Each lane starts from its own genesis hash: sha256('engram-audit-genesis:<lane>').
    op.execute(
        "INSERT INTO engram.audit_chain_heads (lane, last_seq, last_hash) "
        "SELECT lane, NULL, sha256(convert_to('engram-audit-genesis:' || lane, 'UTF8')) "
        "FROM generate_series(0, 15) AS lane"
    )
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
    op.execute("REVOKE ALL ON engram.librarian_audit, engram.audit_chain_heads FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.librarian_audit TO engram_runtime")
    op.execute("GRANT SELECT ON engram.audit_chain_heads TO engram_runtime")
    op.execute("GRANT UPDATE (last_seq, last_hash) ON engram.audit_chain_heads TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.audit_chain_heads")
    op.execute("DROP TABLE engram.librarian_audit")
    op.execute("DROP FUNCTION engram.refuse_audit_change()")
    op.execute("RESET ROLE")
