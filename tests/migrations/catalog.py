"""Reads the parts of the catalog a migration is responsible for, in a stable order."""

from __future__ import annotations

from typing import Any

import asyncpg

QUERIES: dict[str, str] = {
    "columns": """
        SELECT table_name, column_name, data_type, udt_name, is_nullable,
               coalesce(column_default, '') AS column_default,
               is_generated, coalesce(generation_expression, '') AS generation_expression
        FROM information_schema.columns WHERE table_schema = 'engram'
        ORDER BY table_name, ordinal_position
    """,
    "constraints": """
        SELECT c.conrelid::regclass::text AS table_name, c.conname, c.contype::text,
               pg_get_constraintdef(c.oid) AS definition
        FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
        WHERE n.nspname = 'engram' ORDER BY 1, 2
    """,
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'engram' ORDER BY tablename, indexname
    """,
    "triggers": """
        SELECT t.tgrelid::regclass::text AS table_name, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'engram' AND NOT t.tgisinternal ORDER BY 1, 2
    """,
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
               pg_get_userbyid(p.proowner) AS owner,
               coalesce(array_to_string(p.proconfig, ' '), '') AS settings,
               p.prosecdef AS security_definer,
               coalesce(array_to_string(p.proacl, ' '), '') AS grants
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'engram' ORDER BY 1, 2
    """,
    "storage": """
        SELECT c.relname, a.attname, a.attstorage::text
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid
        WHERE n.nspname = 'engram' AND c.relkind = 'r' AND a.attnum > 0
          AND NOT a.attisdropped AND a.attstorage <> t.typstorage
        ORDER BY 1, 2
    """,
    "table_options": """
        SELECT c.relname, array_to_string(c.reloptions, ' ') AS options
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'engram' AND c.relkind = 'r' AND c.reloptions IS NOT NULL
        ORDER BY 1
    """,
    "types": """
        SELECT t.typname, e.enumlabel FROM pg_type t
        JOIN pg_namespace n ON n.oid = t.typnamespace
        JOIN pg_enum e ON e.enumtypid = t.oid
        WHERE n.nspname = 'engram' ORDER BY t.typname, e.enumsortorder
    """,
    "owners": """
        SELECT c.relname, c.relkind::text, pg_get_userbyid(c.relowner) AS owner
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'engram' ORDER BY 1
    """,
    "schema": """
        SELECT nspname, pg_get_userbyid(nspowner) AS owner FROM pg_namespace
        WHERE nspname = 'engram'
    """,
    "table_grants": """
        SELECT table_schema, table_name, grantee, privilege_type
        FROM information_schema.role_table_grants
        WHERE grantee IN ('engram_runtime', 'PUBLIC')
          AND table_schema IN ('engram', 'public')
        ORDER BY 1, 2, 3, 4
    """,
    "column_grants": """
        SELECT table_name, column_name, grantee, privilege_type
        FROM information_schema.column_privileges
        WHERE grantee = 'engram_runtime' AND table_schema = 'engram'
          AND privilege_type = 'UPDATE'
        ORDER BY 1, 2, 3, 4
    """,
    "roles": """
        SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,
               rolreplication, rolbypassrls
        FROM pg_roles WHERE rolname IN ('engram_owner', 'engram_runtime') ORDER BY 1
    """,
    "extensions": "SELECT extname FROM pg_extension WHERE extname = 'vector'",
}


async def read_catalog(url: str) -> dict[str, list[list[Any]]]:
    """Every catalog section of :data:`QUERIES` as lists of row values."""
    conn = await asyncpg.connect(url)
    try:
        return {
            name: [[_plain(value) for value in row] for row in await conn.fetch(sql)]
            for name, sql in QUERIES.items()
        }
    finally:
        await conn.close()


def _plain(value: Any) -> Any:
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)
