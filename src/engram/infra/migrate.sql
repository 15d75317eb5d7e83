-- SQL of the migration run itself (engram.infra.migrations.env, through engram.infra.migrate).

-- name: migration_lock
-- Taken first in the one transaction of a run: kernels starting together on one database
-- migrate one after another, and the next reads the revision the previous committed. The
-- two-key form with its own first key keeps clear of the scheduler's job locks.
SELECT pg_advisory_xact_lock(1701147251, 0)
