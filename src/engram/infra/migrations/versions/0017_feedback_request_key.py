"""A rating is stored once per request.

``memory_feedback.request_key`` names the request that stored a rating: the caller's
idempotency key (REST ``Idempotency-Key``, MCP ``request_id``, the in-process
``request_id``), or one the kernel draws for a call that gave none. The unique index on
(agent, key) makes a retry, the client's after a lost answer or the database adapter's after
a lost commit acknowledgement, find the first rating instead of storing a second one; the
advisor's reward and a record's decay would otherwise count it twice. Ratings stored before
this revision keep no key.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "ALTER TABLE engram.memory_feedback ADD COLUMN request_key text, "
        "ADD CONSTRAINT memory_feedback_request_key_check "
        "CHECK (request_key IS NULL OR length(request_key) BETWEEN 1 AND 400)"
    )
    op.execute(
        "CREATE UNIQUE INDEX memory_feedback_request_idx "
        "ON engram.memory_feedback (agent_id, request_key)"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.memory_feedback_request_idx")
    op.execute("ALTER TABLE engram.memory_feedback DROP COLUMN request_key")
    op.execute("RESET ROLE")
