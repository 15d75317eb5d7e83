-- SQL of the scheduler (engram.jobs, engram.job_runs), run by engram.autonomy.state.
-- Advisory locks of jobs use the two-key form: class 1701147250 ('engr'), hashtext(name).

-- name: ensure_jobs
INSERT INTO jobs (name) SELECT unnest($1::text[]) ON CONFLICT (name) DO NOTHING

-- name: try_lock
SELECT pg_try_advisory_lock(1701147250, hashtext($1))

-- name: unlock
SELECT pg_advisory_unlock(1701147250, hashtext($1))

-- name: job
SELECT name, last_due, running, holder, started_at, finished_at, outcome, detail, duration_ms,
       failures, retry_at, runs, cursor
FROM jobs WHERE name = $1

-- name: all_jobs
SELECT name, last_due, running, holder, started_at, finished_at, outcome, detail, duration_ms,
       failures, retry_at, runs, cursor
FROM jobs ORDER BY name

-- name: now
SELECT clock_timestamp()

-- name: last_attempt
SELECT coalesce(max(attempt), 0) FROM job_runs WHERE job = $1 AND due_at = $2

-- name: mark_checked
-- A watched condition did not hold at this due time: nothing ran, nothing to retry.
UPDATE jobs SET last_due = $2 WHERE name = $1

-- name: abandon_run
-- The holder of a running job died (its lock is free): its open run is closed as abandoned.
-- An abandoned scheduled run counts as a failure ($3: when it may be retried); an abandoned
-- manual run leaves the scheduled state as it was. The job's row changes only with a run
-- closed here (or a row marked running without one): a retry after a commit whose
-- acknowledgement was lost finds nothing open and changes nothing.
WITH closed AS (
    UPDATE job_runs SET outcome = 'abandoned', finished_at = $2
    WHERE job = $1 AND outcome = 'running'
    RETURNING manual
), manual AS (
    SELECT coalesce(bool_and(manual), false) AS only FROM closed
)
UPDATE jobs SET running = false, finished_at = $2,
       outcome = CASE WHEN manual.only THEN jobs.outcome ELSE 'abandoned' END,
       failures = CASE WHEN manual.only THEN jobs.failures ELSE jobs.failures + 1 END,
       retry_at = CASE WHEN manual.only THEN jobs.retry_at ELSE $3 END,
       detail = 'its kernel stopped before it finished (' || coalesce(jobs.holder, '?') || ')'
FROM manual
WHERE name = $1 AND jobs.running

-- name: start_run
-- $2 due, $3 attempt, $4 manual, $5 holder, $6 started. Manual runs leave last_due alone.
WITH run AS (
    INSERT INTO job_runs (job, due_at, attempt, manual, holder, started_at)
    VALUES ($1, $2, $3, $4, $5, $6)
    RETURNING id
)
UPDATE jobs SET running = true, holder = $5, started_at = $6, finished_at = NULL,
       last_due = CASE WHEN $4 THEN last_due ELSE $2 END
WHERE name = $1
RETURNING (SELECT id FROM run) AS run_id

-- name: own_run
-- The run $2 due, $3 attempt that holder $4 started at $5 (a start whose answer was lost).
SELECT r.id AS run_id FROM job_runs AS r JOIN jobs AS j ON j.name = r.job
WHERE r.job = $1 AND r.due_at = $2 AND r.attempt = $3 AND r.holder = $4
  AND r.started_at = $5 AND j.running AND j.holder = $4

-- name: finish_run
-- $2 run id, $3 outcome, $4 finished, $5 detail (jsonb), $6 summary text, $7 duration ms,
-- $8 retry_at (failed runs), $9 cursor (a succeeded run's due time), $10 holder, $11 manual.
-- A run another kernel already recorded as abandoned (this one lost its lock meanwhile)
-- is left as it is, and so is the job's row. A manual run leaves the scheduled state (outcome,
-- failures, retry time) as it was: it neither retries nor excuses a due time.
WITH run AS (
    UPDATE job_runs SET outcome = $3, finished_at = $4, detail = $5
    WHERE id = $2 AND outcome = 'running'
    RETURNING id
)
UPDATE jobs SET running = false, finished_at = $4, detail = $6, duration_ms = $7,
       runs = runs + 1,
       outcome = CASE WHEN $11 THEN outcome ELSE $3 END,
       failures = CASE WHEN $11 THEN failures WHEN $3 = 'succeeded' THEN 0 ELSE failures + 1 END,
       retry_at = CASE WHEN $11 THEN retry_at ELSE $8 END,
       cursor = coalesce($9, cursor)
WHERE name = $1 AND running AND holder = $10 AND EXISTS (SELECT 1 FROM run)
RETURNING failures

-- name: own_finish
-- The job's consecutive failures when run $2 of job $1 was closed with outcome $3 at $4, the
-- job's row with it (a finish whose acknowledgement was lost, run again); no row otherwise.
SELECT j.failures FROM job_runs AS r JOIN jobs AS j ON j.name = r.job
WHERE r.job = $1 AND r.id = $2 AND r.outcome = $3 AND r.finished_at = $4
  AND j.finished_at = $4 AND NOT j.running

-- name: recent_runs
SELECT id, job, due_at, attempt, manual, holder, started_at, finished_at, outcome, detail
FROM job_runs WHERE ($1::text IS NULL OR job = $1) ORDER BY id DESC LIMIT $2

-- name: prune_runs
DELETE FROM job_runs WHERE started_at < $1 AND outcome <> 'running'
