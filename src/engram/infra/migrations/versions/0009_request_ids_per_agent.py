"""Request ids are each agent's own: unique per (agent_id, request_id), not across agents.

A client-chosen idempotency key such as ``r-1`` is common; unique across all agents, a second
agent using it got the first agent's recorded result back (its record id and content) and its
own write was silently not made. The key of an idempotent retry is now the pair.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_request_id_key")
    op.execute(
        "ALTER TABLE engram.librarian_audit ADD CONSTRAINT librarian_audit_agent_request_key "
        "UNIQUE (agent_id, request_id)"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    # Fails (unique violation) when two agents already used the same request id: the older
    # schema cannot hold that log, and the audit log is never rewritten to make it fit.
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_agent_request_key"
    )
    op.execute(
        "ALTER TABLE engram.librarian_audit ADD CONSTRAINT librarian_audit_request_id_key "
        "UNIQUE (request_id)"
    )
    op.execute("RESET ROLE")
