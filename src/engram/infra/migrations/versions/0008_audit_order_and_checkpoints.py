"""The audit log's global order made tamper-evident: ``seq`` in each row's hash, and sealed
checkpoints.

``librarian_audit.hash_version`` says which hash format a row was written in: 1 for the rows
written before this revision (their hash does not cover ``seq``; they keep it, history is not
rewritten), 2 for every row appended from now on (``sha256(prev_hash || int8(seq) ||
payload)``). The append draws ``seq`` itself (``nextval`` after it holds its lane's head, then
``OVERRIDING SYSTEM VALUE``), so the runtime role gets USAGE on the identity's sequence.

``audit_checkpoints`` is a chain of sealed checkpoints: each row commits to every lane's head
(seq and hash) at the moment it was sealed, to the order of the rows it newly covers, and to
the previous checkpoint's hash. Append-only like the log: INSERT and SELECT for the runtime
role, triggers refusing UPDATE, DELETE and TRUNCATE for everyone. Its primary key is the
checkpoint's number, which each sealer takes as the previous one's plus one, so two kernels
sealing at once cannot fork the chain (the second insert fails).

Downgrading refuses while the log holds rows in format 2: the previous schema has no
``hash_version`` and would report every one of them as edited.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    # Existing rows take the default 1 (no table rewrite); rows appended later are format 2.
    op.execute(
        "ALTER TABLE engram.librarian_audit "
        "ADD COLUMN hash_version smallint NOT NULL DEFAULT 1, "
        "ADD CONSTRAINT librarian_audit_hash_version_check CHECK (hash_version IN (1, 2))"
    )
    op.execute("ALTER TABLE engram.librarian_audit ALTER COLUMN hash_version SET DEFAULT 2")
    op.execute("GRANT USAGE ON SEQUENCE engram.librarian_audit_seq_seq TO engram_runtime")
    op.execute(
        """
        CREATE TABLE engram.audit_checkpoints (
            id              bigint PRIMARY KEY,
            sealed_at       timestamptz NOT NULL,
            through_seq     bigint NOT NULL,
            rows_sealed     bigint NOT NULL,
            lane_seqs       bigint[] NOT NULL,
            lane_hashes     bytea[] NOT NULL,
            order_digest    bytea NOT NULL,
            prev_hash       bytea NOT NULL,
            checkpoint_hash bytea NOT NULL,
            CONSTRAINT audit_checkpoints_id_check CHECK (id > 0),
            CONSTRAINT audit_checkpoints_counts_check CHECK (through_seq >= 0 AND rows_sealed >= 0),
            CONSTRAINT audit_checkpoints_lanes_check
                CHECK (cardinality(lane_seqs) = 16 AND cardinality(lane_hashes) = 16),
            CONSTRAINT audit_checkpoints_hash_check
                CHECK (length(order_digest) = 32 AND length(prev_hash) = 32
                       AND length(checkpoint_hash) = 32)
        )
        """
    )
    # One refusal for both append-only tables; it names the table it guards.
    op.execute(
        """
        CREATE OR REPLACE FUNCTION engram.refuse_audit_change() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'insufficient_privilege';
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER audit_checkpoints_no_update_delete
            BEFORE UPDATE OR DELETE ON engram.audit_checkpoints
            FOR EACH ROW EXECUTE FUNCTION engram.refuse_audit_change()
        """
    )
    op.execute(
        """
        CREATE TRIGGER audit_checkpoints_no_truncate
            BEFORE TRUNCATE ON engram.audit_checkpoints
            FOR EACH STATEMENT EXECUTE FUNCTION engram.refuse_audit_change()
        """
    )
    op.execute("REVOKE ALL ON engram.audit_checkpoints FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.audit_checkpoints TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        DO $$
        BEGIN
            IF EXISTS (SELECT 1 FROM engram.librarian_audit WHERE hash_version = 2) THEN
                RAISE EXCEPTION 'librarian_audit holds rows hashed in format 2; without '
                    'hash_version they would no longer verify: refusing to downgrade';
            END IF;
        END
        $$
        """
    )
    op.execute("DROP TABLE engram.audit_checkpoints")
    op.execute(
        """
        CREATE OR REPLACE FUNCTION engram.refuse_audit_change() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'librarian_audit is append-only: % refused', TG_OP
                USING ERRCODE = 'insufficient_privilege';
        END
        $$
        """
    )
    op.execute("REVOKE USAGE ON SEQUENCE engram.librarian_audit_seq_seq FROM engram_runtime")
    op.execute("ALTER TABLE engram.librarian_audit DROP COLUMN hash_version")
    op.execute("RESET ROLE")
