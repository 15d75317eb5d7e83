"""The transactional outbox of domain events, and the registry of agents.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.outbox (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            event_type    text NOT NULL,
            aggregate_id  uuid NOT NULL,
            payload       jsonb NOT NULL,
            decision_id   uuid,
            created_at    timestamptz NOT NULL DEFAULT now(),
            dispatched_at timestamptz,
            attempts      integer NOT NULL DEFAULT 0,
            CONSTRAINT outbox_event_type_check CHECK (event_type ~ '^[a-z_]+\\.[a-z_]+$')
        )
        """
    )
    op.execute("CREATE INDEX outbox_pending_idx ON engram.outbox (id) WHERE dispatched_at IS NULL")
    op.execute(
        """
        CREATE TABLE engram.agents (
            id           uuid PRIMARY KEY,
            name         text NOT NULL,
            token_hash   bytea NOT NULL,
            token_prefix text NOT NULL,
            trust_level  text NOT NULL,
            permissions  jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at   timestamptz NOT NULL DEFAULT now(),
            revoked_at   timestamptz,
            last_seen_at timestamptz,
            CONSTRAINT agents_name_key UNIQUE (name),
            CONSTRAINT agents_token_hash_key UNIQUE (token_hash),
            CONSTRAINT agents_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
            CONSTRAINT agents_token_hash_check CHECK (length(token_hash) = 32),
            CONSTRAINT agents_trust_level_check
                CHECK (trust_level IN ('trusted', 'standard', 'restricted', 'read_only')),
            CONSTRAINT agents_permissions_check CHECK (jsonb_typeof(permissions) = 'object')
        )
        """
    )
    op.execute("REVOKE ALL ON engram.outbox, engram.agents FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT, DELETE ON engram.outbox TO engram_runtime")
    op.execute("GRANT UPDATE (dispatched_at, attempts) ON engram.outbox TO engram_runtime")
    op.execute("GRANT SELECT, INSERT ON engram.agents TO engram_runtime")
    op.execute(
        "GRANT UPDATE (token_hash, token_prefix, trust_level, permissions, revoked_at, "
        "last_seen_at) ON engram.agents TO engram_runtime"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.agents")
    op.execute("DROP TABLE engram.outbox")
    op.execute("RESET ROLE")
