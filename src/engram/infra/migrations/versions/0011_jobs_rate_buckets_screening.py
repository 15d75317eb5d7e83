"""Background jobs, rate buckets shared by every kernel, and the PII screening version.

``engram.jobs`` holds one row per scheduled job: the due time it last claimed, whether a run
is in progress and on which kernel (``holder``), the last outcome, consecutive failures and
when a failed run may be retried. ``engram.job_runs`` keeps one row per attempt; ``UNIQUE (job,
due_at, attempt)`` makes a second claim of the same attempt impossible even if two kernels
raced past their advisory locks. ``engram.rate_buckets`` is the token bucket of each agent,
updated by one statement per external write, so every kernel process draws on the same
bucket. ``memories.screened_with`` names the PII detector version that screened a version
(NULL: one older than this column); the rescan job finds the versions an improved detector
has not read yet.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        """
        CREATE TABLE engram.jobs (
            name          text PRIMARY KEY,
            last_due      timestamptz,
            running       boolean NOT NULL DEFAULT false,
            holder        text,
            started_at    timestamptz,
            finished_at   timestamptz,
            outcome       text,
            detail        text,
            duration_ms   double precision,
            failures      integer NOT NULL DEFAULT 0,
            retry_at      timestamptz,
            runs          bigint NOT NULL DEFAULT 0,
            cursor        timestamptz,
            CONSTRAINT jobs_outcome_check
                CHECK (outcome IS NULL OR outcome IN ('succeeded', 'failed', 'abandoned')),
            CONSTRAINT jobs_failures_check CHECK (failures >= 0)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE engram.job_runs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job         text NOT NULL REFERENCES engram.jobs (name),
            due_at      timestamptz NOT NULL,
            attempt     integer NOT NULL,
            manual      boolean NOT NULL DEFAULT false,
            holder      text NOT NULL,
            started_at  timestamptz NOT NULL,
            finished_at timestamptz,
            outcome     text NOT NULL DEFAULT 'running',
            detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
            CONSTRAINT job_runs_attempt_key UNIQUE (job, due_at, attempt),
            CONSTRAINT job_runs_outcome_check
                CHECK (outcome IN ('running', 'succeeded', 'failed', 'abandoned'))
        )
        """
    )
    op.execute("CREATE INDEX job_runs_started_idx ON engram.job_runs (started_at)")
    op.execute(
        """
        CREATE TABLE engram.rate_buckets (
            agent_id   text PRIMARY KEY,
            tokens     double precision NOT NULL,
            updated_at timestamptz NOT NULL,
            allowed    boolean NOT NULL
        )
        """
    )
    op.execute("ALTER TABLE engram.memories ADD COLUMN screened_with text")
    # The heads the PII rescan reads, oldest screening first.
    op.execute(
        "CREATE INDEX memories_screening_idx ON engram.memories (screened_with, ingestion_time) "
        "WHERE superseded_by IS NULL AND status <> 'forgotten'"
    )
    op.execute("REVOKE ALL ON engram.jobs, engram.job_runs, engram.rate_buckets FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT, UPDATE ON engram.jobs TO engram_runtime")
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON engram.job_runs TO engram_runtime")
    op.execute("GRANT SELECT, INSERT, UPDATE ON engram.rate_buckets TO engram_runtime")
    op.execute("GRANT UPDATE (screened_with) ON engram.memories TO engram_runtime")
    # Retention: acknowledged escalations past their keep-for period may be deleted.
    op.execute("GRANT DELETE ON engram.escalations TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("REVOKE DELETE ON engram.escalations FROM engram_runtime")
    op.execute("DROP INDEX engram.memories_screening_idx")
    op.execute("ALTER TABLE engram.memories DROP COLUMN screened_with")
    op.execute("DROP TABLE engram.rate_buckets")
    op.execute("DROP TABLE engram.job_runs")
    op.execute("DROP TABLE engram.jobs")
    op.execute("RESET ROLE")
