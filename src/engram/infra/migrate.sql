-- SQL of the migration run itself (engram.infra.migrations.env, through engram.infra.migrate).

-- name: migration_lock
-- Taken first in the one transaction of a run: kernels starting together on one database
-- migrate one after another, and the next reads the revision the previous committed. The
-- two-key form with its own first key keeps clear of the scheduler's job locks.
SELECT pg_advisory_xact_lock(1701147251, 0)

-- name: migration_lock_try
-- The same lock without waiting: false when another run holds it, so the wait can be said.
SELECT pg_try_advisory_xact_lock(1701147251, 0)

-- name: migration_lock_holder
-- The backend holding the migration lock (none when it was released meanwhile).
SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND classid = 1701147251 AND objid = 0 AND objsubid = 2 AND granted
LIMIT 1
