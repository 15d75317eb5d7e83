"""An admin reading quarantined content is an audited action.

The admin commands hide the content of records the PII check flagged unless an admin asks
with ``--reveal``; each such request leaves one audit row, action ``REVEAL`` with outcome
``revealed``, naming the admin, what was shown and why.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_action_check, "
        "ADD CONSTRAINT librarian_audit_action_check "
        "CHECK (action IN ('CREATE', 'UPDATE', 'FORGET', 'RELEASE', 'REVEAL'))"
    )
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_outcome_check, "
        "ADD CONSTRAINT librarian_audit_outcome_check "
        "CHECK (outcome IN ('created', 'updated', 'forgotten', 'reinforced', 'released', "
        "'revealed', 'none'))"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_outcome_check, "
        "ADD CONSTRAINT librarian_audit_outcome_check "
        "CHECK (outcome IN ('created', 'updated', 'forgotten', 'reinforced', 'released', "
        "'none')) NOT VALID"
    )
    op.execute(
        "ALTER TABLE engram.librarian_audit DROP CONSTRAINT librarian_audit_action_check, "
        "ADD CONSTRAINT librarian_audit_action_check "
        "CHECK (action IN ('CREATE', 'UPDATE', 'FORGET', 'RELEASE')) NOT VALID"
    )
    op.execute("RESET ROLE")
