"""The audit log's agent filter reads an index.

Since 0022 the admin filter ``?agent=`` (``engram audit export --agent``) matches an agent
whatever the case it is given in, ``lower(agent_id COLLATE "C") = lower($1 COLLATE "C")``,
which ``librarian_audit_agent_idx (agent_id, occurred_at)`` cannot serve: a page of a rare
agent's entries walked the log by ``seq`` until it had filled (the whole log, for an agent
with none). That index served nothing else (the request-id look-up has its own unique key).
It is replaced by one on the folded name and ``seq``, which gives a page of one agent's
entries in ``seq`` order from the cursor on: one index entry per audit row, as before, so an
append costs the same.

Building it reads the whole log once while appends wait (3.8 s for a million rows on two
busy cores, measured for this migration): run ``engram migrate`` in a quiet hour on a large
store (docs/operations.md).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.librarian_audit_agent_idx")
    op.execute(
        "CREATE INDEX librarian_audit_agent_folded_idx "
        'ON engram.librarian_audit (lower(agent_id COLLATE "C"), seq)'
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.librarian_audit_agent_folded_idx")
    op.execute(
        "CREATE INDEX librarian_audit_agent_idx ON engram.librarian_audit (agent_id, occurred_at)"
    )
    op.execute("RESET ROLE")
