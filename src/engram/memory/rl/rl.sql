-- SQL of the advisor's learning (engram.memory.rl): the decisions it is trained on, their
-- outcomes, and the trained policies (engram.advisor_models).

-- name: decisions
-- Outside CREATEs that Layer 2 decided and recorded a state for, the newest $3 (newest first).
SELECT a.seq, a.occurred_at, a.record_id, a.version_id, a.layer2_decision::jsonb AS advice
FROM librarian_audit a
WHERE a.action = 'CREATE' AND a.decision = 'approved' AND a.decision_type = 'external'
  AND a.layer2_decision IS NOT NULL
  AND a.occurred_at >= $1 AND a.occurred_at < $2
ORDER BY a.seq DESC
LIMIT $3

-- name: outcomes
-- For each decision n (the record $1 and the version $4 it stored, its nearest record $2,
-- decided at $3): the ratings of that version within the horizon ($5), and how many of its
-- useful ratings the same agent also gave the nearest record within $6 (the same answer
-- found twice); and the nearest record's ratings in that time, of versions with the content
-- it had then (a resolution that only ends its validity keeps the content; a merge into it
-- later does not): "not useful" ones (it was stale), and useful ones the admitted version did
-- not share.
WITH given AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::uuid[])
        WITH ORDINALITY AS d(record_id, nearest, at, version_id, n)
), d AS (
    SELECT given.*,
           (SELECT v.content FROM memories v
            WHERE v.record_id = given.nearest AND v.ingestion_time <= given.at
            ORDER BY v.version DESC LIMIT 1) AS nearest_content
    FROM given
)
SELECT d.n,
       count(f.id) FILTER (WHERE f.useful) AS useful,
       count(f.id) FILTER (WHERE NOT f.useful) AS not_useful,
       count(f.id) FILTER (
           WHERE f.useful AND EXISTS (
               SELECT 1 FROM memory_feedback g
               WHERE g.record_id = d.nearest AND g.useful AND g.agent_id = f.agent_id
                 AND g.created_at BETWEEN f.created_at - $6::interval AND f.created_at + $6::interval
           )
       ) AS redundant,
       (SELECT count(*) FROM memory_feedback g JOIN memories v ON v.id = g.version_id
        WHERE g.record_id = d.nearest AND NOT g.useful AND v.content = d.nearest_content
          AND g.created_at >= d.at AND g.created_at < d.at + $5::interval) AS nearest_stale,
       (SELECT count(*) FROM memory_feedback g JOIN memories v ON v.id = g.version_id
        WHERE g.record_id = d.nearest AND g.useful AND v.content = d.nearest_content
          AND g.created_at >= d.at AND g.created_at < d.at + $5::interval
          AND NOT EXISTS (
              SELECT 1 FROM memory_feedback h
              WHERE h.version_id = d.version_id AND h.useful AND h.agent_id = g.agent_id
                AND h.created_at BETWEEN g.created_at - $6::interval AND g.created_at + $6::interval
          )) AS nearest_lost
FROM d
LEFT JOIN memory_feedback f
       ON f.record_id = d.record_id AND f.version_id = d.version_id
      AND f.created_at >= d.at AND f.created_at < d.at + $5::interval
GROUP BY d.n, d.nearest, d.at, d.version_id, d.nearest_content

-- name: model_count
SELECT count(*) FROM advisor_models

-- name: insert_model
INSERT INTO advisor_models
    (version, feature_schema, policy, digest, data_from, data_until, decisions, metrics)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: model
SELECT version, feature_schema, policy, digest, data_from, data_until, decisions, metrics,
       evaluation, status, created_at, promoted_at, retired_at
FROM advisor_models WHERE version = $1

-- name: models
SELECT version, feature_schema, policy, digest, data_from, data_until, decisions, metrics,
       evaluation, status, created_at, promoted_at, retired_at
FROM advisor_models ORDER BY serial DESC LIMIT $1

-- name: active_model
SELECT version, feature_schema, policy, digest, data_from, data_until, decisions, metrics,
       evaluation, status, created_at, promoted_at, retired_at
FROM advisor_models WHERE status = 'active'

-- name: newest_candidate
SELECT version, feature_schema, policy, digest, data_from, data_until, decisions, metrics,
       evaluation, status, created_at, promoted_at, retired_at
FROM advisor_models WHERE status = 'candidate' ORDER BY serial DESC LIMIT 1

-- name: feedback_since
-- Feedback rows given since the newest model was trained and since $1 (NULL: ever), counted
-- up to $2 (the threshold: the count stops there).
SELECT count(*) FROM (
    SELECT 1 FROM memory_feedback
    WHERE created_at > greatest(
        coalesce((SELECT max(created_at) FROM advisor_models), '-infinity'),
        coalesce($1::timestamptz, '-infinity')
    )
    LIMIT $2
) AS given

-- name: decisions_logged
-- Outside CREATEs decided by Layer 2: what a learned advisor can be trained on.
SELECT count(*) FROM librarian_audit
WHERE action = 'CREATE' AND decision = 'approved' AND decision_type = 'external'
  AND layer2_decision IS NOT NULL

-- name: set_evaluation
UPDATE advisor_models SET evaluation = $2 WHERE version = $1 RETURNING version

-- name: retire_active
UPDATE advisor_models SET status = 'retired', retired_at = $1 WHERE status = 'active'
RETURNING version, replaced

-- name: activate
-- A promotion: $3 is the model it retires (NULL: the heuristic), where a rollback returns.
UPDATE advisor_models SET status = 'active', promoted_at = $2, retired_at = NULL, replaced = $3
WHERE version = $1 RETURNING version

-- name: reactivate
-- A rollback: the model keeps the model its own promotion retired (a second rollback goes there).
UPDATE advisor_models SET status = 'active', retired_at = NULL WHERE version = $1
RETURNING version

-- name: lock_models
SELECT pg_advisory_xact_lock(1701147250, hashtext('advisor_models'))
