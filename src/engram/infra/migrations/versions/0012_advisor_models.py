"""Trained advisor policies as versioned rows.

``engram.advisor_models`` keeps every policy the advisor training produced: its version name,
the feature schema it was fitted to, the weights (JSON), their SHA-256 (what an audit row's
decision source pins), the range of audit rows it was trained on, its training metrics and
its last evaluation. ``status`` is ``candidate`` until promoted; at most one row is
``active`` (a partial unique index); promotion and rollback move the other rows to
``retired``. ``replaced`` names the model a promotion retired, so a rollback returns to it
(and a second rollback to the one before). Rows are never deleted: an audit row names the
version that advised it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.advisor_models (
            version         text PRIMARY KEY,
            serial          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
            feature_schema  text NOT NULL,
            policy          jsonb NOT NULL,
            digest          text NOT NULL,
            data_from       timestamptz,
            data_until      timestamptz,
            decisions       integer NOT NULL,
            metrics         jsonb NOT NULL,
            evaluation      jsonb,
            status          text NOT NULL DEFAULT 'candidate',
            created_at      timestamptz NOT NULL DEFAULT now(),
            promoted_at     timestamptz,
            retired_at      timestamptz,
            replaced        text REFERENCES engram.advisor_models (version),
            CONSTRAINT advisor_models_status_check
                CHECK (status IN ('candidate', 'active', 'retired')),
            CONSTRAINT advisor_models_version_check CHECK (version ~ '^rl@[0-9]{1,9}$'),
            CONSTRAINT advisor_models_digest_check CHECK (digest ~ '^[0-9a-f]{64}$'),
            CONSTRAINT advisor_models_decisions_check CHECK (decisions >= 0)
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX advisor_models_one_active ON engram.advisor_models ((true)) "
        "WHERE status = 'active'"
    )
    op.execute("REVOKE ALL ON engram.advisor_models FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT, UPDATE ON engram.advisor_models TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.advisor_models")
    op.execute("RESET ROLE")
