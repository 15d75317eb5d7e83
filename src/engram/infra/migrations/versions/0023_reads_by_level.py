"""Reads are counted by the level of the version read, for the readers who could make them.

``memory_access`` counted reads per record, so a record kept at ``sensitive`` and read there
often, then lowered to ``agent``, showed agent-level readers a decay score lifted by reads
none of them could have made (pass AF). Each statistic is now an array of five elements, one
per access level (public, agent, user, system, sensitive); element L counts the reads of the
record's versions at level L or below, what the readers of a head at L could have read. A
head's decay reads the element of its own level (ADR-009, amendment of 2026-11-29, second).
One row per record stays one row: a read costs the flush no more rows than before.

Rows of before name no level. Every version read then was at or below the highest level any
version of the record has had, so their counts go to that level's element and every element
above it (a read made then could have been made by any of those readers), and to none below:
a record lowered since loses, for its new readers, the reads made before this revision
rather than keeping reads they could not have made. A row whose record has no version left
keeps them at ``sensitive`` alone, and so does one with a version the PII check held: a
quarantine release lowers that version's level in place, so only its ``metadata.pii`` (the
finding, which a release keeps) says the record was read at ``sensitive``. Downgrading keeps
the ``sensitive`` element, which counts every read of the record: the one count per record of
before.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_ORDER = "ARRAY['public', 'agent', 'user', 'system', 'sensitive']"
_LEVELS = 5


def _by_level(column: str, below: str) -> str:
    """An array of ``column`` for the elements from the row's ``top`` up, ``below`` under it."""
    items = ", ".join(
        f"CASE WHEN top <= {rank} THEN {column} ELSE {below} END" for rank in range(1, _LEVELS + 1)
    )
    return f"ARRAY[{items}]"


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("ALTER TABLE engram.memory_access ADD COLUMN top integer")
    op.execute(
        f"""
        UPDATE engram.memory_access a
        SET top = coalesce(
            (SELECT max(CASE WHEN m.metadata ? 'pii' THEN {_LEVELS}
                             ELSE array_position({_ORDER}, m.access_level::text) END)
             FROM engram.memories m WHERE m.record_id = a.record_id),
            {_LEVELS})
        """
    )
    op.execute(
        "ALTER TABLE engram.memory_access "
        "DROP CONSTRAINT memory_access_count_check, "
        "DROP CONSTRAINT memory_access_period_check, "
        "DROP CONSTRAINT memory_access_reinforcements_check, "
        "ALTER COLUMN access_count DROP DEFAULT, "
        "ALTER COLUMN period_count DROP DEFAULT, "
        "ALTER COLUMN reinforcements DROP DEFAULT, "
        f"ALTER COLUMN access_count TYPE bigint[] USING {_by_level('access_count', '0')}, "
        "ALTER COLUMN last_accessed_at TYPE timestamptz[] "
        f"USING {_by_level('last_accessed_at', 'NULL')}, "
        f"ALTER COLUMN period_count TYPE integer[] USING {_by_level('period_count', '0')}, "
        "ALTER COLUMN reinforcements TYPE double precision[] "
        f"USING {_by_level('reinforcements', '0')}"
    )
    op.execute(
        "ALTER TABLE engram.memory_access DROP COLUMN top, "
        "ADD CONSTRAINT memory_access_levels_check CHECK ("
        f"cardinality(access_count) = {_LEVELS} AND cardinality(last_accessed_at) = {_LEVELS} "
        f"AND cardinality(period_count) = {_LEVELS} AND cardinality(reinforcements) = {_LEVELS}"
        "), "
        "ADD CONSTRAINT memory_access_count_check CHECK (0 <= ALL (access_count)), "
        "ADD CONSTRAINT memory_access_period_check CHECK (0 <= ALL (period_count)), "
        "ADD CONSTRAINT memory_access_reinforcements_check CHECK (0 <= ALL (reinforcements))"
    )
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "ALTER TABLE engram.memory_access "
        "DROP CONSTRAINT memory_access_levels_check, "
        "DROP CONSTRAINT memory_access_count_check, "
        "DROP CONSTRAINT memory_access_period_check, "
        "DROP CONSTRAINT memory_access_reinforcements_check, "
        f"ALTER COLUMN access_count TYPE bigint USING access_count[{_LEVELS}], "
        "ALTER COLUMN last_accessed_at TYPE timestamptz "
        f"USING coalesce(last_accessed_at[{_LEVELS}], now()), "
        f"ALTER COLUMN period_count TYPE integer USING period_count[{_LEVELS}], "
        "ALTER COLUMN reinforcements TYPE double precision "
        f"USING reinforcements[{_LEVELS}], "
        "ALTER COLUMN access_count SET DEFAULT 0, "
        "ALTER COLUMN period_count SET DEFAULT 0, "
        "ALTER COLUMN reinforcements SET DEFAULT 0, "
        "ADD CONSTRAINT memory_access_count_check CHECK (access_count >= 0), "
        "ADD CONSTRAINT memory_access_period_check CHECK (period_count >= 0), "
        "ADD CONSTRAINT memory_access_reinforcements_check CHECK (reinforcements >= 0)"
    )
    op.execute("RESET ROLE")
