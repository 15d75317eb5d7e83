"""An outbox event deferred by a failing subscriber waits for its own retry time.

A subscriber failing for an infrastructure reason leaves its event pending, and it used to be
tried again at every drain, which every commit starts. Unrelated writes could therefore spend
an event's attempts within a second of an outage starting, after which it counted as
delivered. ``next_attempt_at`` holds when a deferred event is due again (exponential backoff,
``engram.infra.outbox``); drains skip it until then.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.outbox ADD COLUMN next_attempt_at timestamptz")
    op.execute("GRANT UPDATE (next_attempt_at) ON engram.outbox TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.outbox DROP COLUMN next_attempt_at")
    op.execute("RESET ROLE")
