"""The webhook leaves the outbox's line: escalations carry their own webhook delivery state.

Until now the outbox called the webhook while it delivered events, one after another, inside
its drain. A receiver that answered slowly (just under its 5 s) therefore held every event
behind each escalation, conflict resolutions included, without ever failing (hostile pass W).
The admin queue's row is now where a webhook delivery waits: the outbox only queues the row,
and a relay (``engram.notifications.relay``) sends what is due, outside any transaction, and
records the outcome here.

- ``webhook_due_at``: when the row is next to be sent (NULL: nothing to send, because no
  webhook was configured when it was queued, it was sent, or it was given up). A relay that
  takes a row moves this forward by a lease, so a relay killed mid-send leaves the row to be
  taken again when the lease ends.
- ``webhook_attempts``: failed sends so far (a backoff doubles with each).
- ``webhook_sent_at``: when the receiver accepted it.

Rows queued before this revision keep NULL: their webhook calls were made (or failed and are
still in the outbox, whose next delivery marks the row due: ``escalations.sql``, ``queue``).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        ALTER TABLE engram.escalations
            ADD COLUMN webhook_due_at timestamptz,
            ADD COLUMN webhook_attempts integer NOT NULL DEFAULT 0,
            ADD COLUMN webhook_sent_at timestamptz,
            ADD CONSTRAINT escalations_webhook_attempts_check CHECK (webhook_attempts >= 0)
        """
    )
    op.execute(
        "CREATE INDEX escalations_webhook_due_idx ON engram.escalations (webhook_due_at, id) "
        "WHERE webhook_due_at IS NOT NULL"
    )
    op.execute(
        "GRANT UPDATE (webhook_due_at, webhook_attempts, webhook_sent_at) "
        "ON engram.escalations TO engram_runtime"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.escalations_webhook_due_idx")
    op.execute(
        """
        ALTER TABLE engram.escalations
            DROP CONSTRAINT escalations_webhook_attempts_check,
            DROP COLUMN webhook_sent_at,
            DROP COLUMN webhook_attempts,
            DROP COLUMN webhook_due_at
        """
    )
    op.execute("RESET ROLE")
