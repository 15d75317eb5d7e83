"""Agent names are unique whatever their case.

``agents_name_key UNIQUE (name)`` let ``LOCAL`` be registered beside ``local``: two agents
that read as one in every audit row, listing and log line (pass AF). A unique index on
``lower(name COLLATE "C")`` now refuses the second spelling, as the constraint refuses an
exact duplicate. Names are ASCII (``agents_name_check``), and the "C" collation folds ASCII
letters alone, the same in every database (under a Turkish collation ``lower('I')`` is a
dotless i, so ``LIST`` and ``list`` would not meet). The registry looks agents up through
the same index.

A store that already holds such a pair cannot take the index, and no choice the migration
could make for it is safe: an agent's name is its identity in the audit log (which cannot be
rewritten), in the records it wrote (a restricted agent may change only its own), in its
request ids and its rate limit, so renaming one silently would change what it may do, and
merging two would give one agent's tokens the other's history. The upgrade therefore stops
before changing anything, naming every group of names that differ only in case and the
statement that renames one; the operator chooses which to rename (ADR-011, amendment of
2026-11-29).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

#: Stops the upgrade, changing nothing, while two agents' names differ only in case.
_REFUSE_CLASHES = """
DO $$
DECLARE
    groups text;
BEGIN
    SELECT string_agg(names, '; ' ORDER BY first_created)
    INTO groups
    FROM (
        SELECT string_agg(quote_literal(name), ', ' ORDER BY created_at, name) AS names,
               min(created_at) AS first_created
        FROM engram.agents
        GROUP BY lower(name COLLATE "C")
        HAVING count(*) > 1
    ) AS clash;
    IF groups IS NOT NULL THEN
        RAISE EXCEPTION 'agent names must now be unique whatever their case, and these '
            'differ only in case: %. Rename all but one of each group (its tokens keep '
            'working; what it did stays recorded under its old name, and a restricted agent '
            'may no longer change the records it wrote under that name), as the database '
            'owner or a superuser: UPDATE engram.agents SET name = ''<new-name>'' WHERE name '
            '= ''<old-name>''; then migrate again. Nothing was changed.', groups
            USING ERRCODE = 'unique_violation';
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(_REFUSE_CLASHES)
    op.execute(
        'CREATE UNIQUE INDEX agents_name_folded_key ON engram.agents (lower(name COLLATE "C"))'
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP INDEX engram.agents_name_folded_key")
    op.execute("RESET ROLE")
