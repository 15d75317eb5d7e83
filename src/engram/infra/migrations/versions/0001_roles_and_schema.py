"""Roles, the engram schema and the pgvector extension.

Two roles: ``engram_owner`` owns every object and is used only by migrations (through
``SET ROLE``); ``engram_runtime`` is the login the kernel works with: not superuser, not
owner, no BYPASSRLS. Roles are cluster-wide, so they are created only if missing and dropped
on downgrade only when no database of the cluster still depends on them.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        """
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'engram_owner') THEN
                CREATE ROLE engram_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
                    NOREPLICATION NOBYPASSRLS;
            END IF;
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'engram_runtime') THEN
                CREATE ROLE engram_runtime LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
                    NOREPLICATION NOBYPASSRLS NOINHERIT;
            END IF;
            IF current_user <> 'engram_owner'
               AND NOT pg_has_role(current_user, 'engram_owner', 'MEMBER') THEN
                GRANT engram_owner TO CURRENT_USER;
            END IF;
        END
        $$
        """
    )
    op.execute("CREATE SCHEMA engram AUTHORIZATION engram_owner")
    op.execute("REVOKE ALL ON SCHEMA engram FROM PUBLIC")
    op.execute("GRANT USAGE ON SCHEMA engram TO engram_runtime")
    # /readyz compares the applied revision with the code's head.
    op.execute("GRANT SELECT ON public.alembic_version TO engram_runtime")


def downgrade() -> None:
    op.execute("REVOKE SELECT ON public.alembic_version FROM engram_runtime")
    op.execute("DROP SCHEMA engram")
    op.execute("DROP EXTENSION IF EXISTS vector")
    op.execute(
        """
        DO $$
        DECLARE
            role_name text;
        BEGIN
            FOREACH role_name IN ARRAY ARRAY['engram_runtime', 'engram_owner'] LOOP
                IF EXISTS (SELECT FROM pg_roles WHERE rolname = role_name)
                   AND NOT EXISTS (
                       SELECT FROM pg_shdepend d JOIN pg_roles r ON r.oid = d.refobjid
                       WHERE r.rolname = role_name AND d.deptype IN ('o', 'a', 'i')
                   ) THEN
                    EXECUTE format('DROP ROLE %I', role_name);
                END IF;
            END LOOP;
        END
        $$
        """
    )
