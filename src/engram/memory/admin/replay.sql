-- Audit replay (engram.memory.admin.replay): the versions as a decision found them. $T is the
-- decision's instant; versions written by the decision itself are left out. A version's status and access level are changed in place
-- when it is superseded, forgotten or released, so the values it had at $T are rebuilt from
-- the audit rows that wrote and released it.

-- The access level version x had at instant $2 (a release since then undone).
-- fragment: level_then
coalesce(
    (SELECT r.input_snapshot->>'previous_level' FROM librarian_audit r
     WHERE r.record_id = x.record_id AND r.version_id = x.id AND r.action = 'RELEASE'
       AND r.occurred_at >= $2
     ORDER BY r.seq
     LIMIT 1),
    x.access_level)

-- name: replay_head_as_of
-- $1 record id, $2 instant, $3 the decision, $4 the version this decision forgot (or NULL).
SELECT {{record_columns}},
       CASE
           WHEN status::text = 'forgotten' AND ingestion_time_end < $2
                AND id IS DISTINCT FROM $4 THEN 'forgotten'
           WHEN status::text IN ('superseded', 'forgotten') THEN coalesce(
               (SELECT a.input_snapshot->>'status' FROM librarian_audit a
                WHERE a.decision_id = x.gate_decision_id), 'active')
           ELSE status::text
       END AS status_at,
       {{level_then}} AS access_level_at
FROM memories x
WHERE record_id = $1 AND ingestion_time < $2 AND gate_decision_id <> $3
ORDER BY version DESC
LIMIT 1

-- name: replay_reader_number
-- The number a reader of the access levels $5 gave version $4 of record $1 just before instant
-- $2 (versions written by decision $3 left out): the versions up to it whose access level then
-- was one of $5 (as engram.memory.temporal.numbering counts them in the Gate).
SELECT count(*)::int
FROM memories x
WHERE x.record_id = $1 AND x.version <= $4 AND x.ingestion_time < $2 AND x.gate_decision_id <> $3
  AND {{level_then}} = ANY($5::text[])

-- fragment: levels
-- The access levels, lowest first (AccessLevel's order).
ARRAY['public', 'agent', 'user', 'system', 'sensitive']

-- name: replay_candidates_as_of
-- What `candidates` returned just before instant $6: $1 embedding (NULL: use the exact row only),
-- $2 namespace, $3 type, $4 content hash, $5 limit, $7 the decision, $8 the access levels the
-- writer could read, $9 those of them the proposal's readers read (where the exact duplicate
-- is looked for, as `candidates` looks for it). A version counts when it was known and not
-- yet ended at $6, its status then was active and its access level then was one of $8; its
-- repetitions then are today's minus the reinforcements recorded since.
WITH known AS (
    SELECT {{record_columns}}, embedding, content_hash,
           coalesce(
               (SELECT r.input_snapshot->>'previous_level' FROM librarian_audit r
                WHERE r.record_id = v.record_id AND r.version_id = v.id AND r.action = 'RELEASE'
                  AND r.occurred_at >= $6
                ORDER BY r.seq
                LIMIT 1),
               access_level) AS access_level_at,
           CASE
               WHEN status::text IN ('superseded', 'forgotten') THEN coalesce(
                   (SELECT a.input_snapshot->>'status' FROM librarian_audit a
                    WHERE a.decision_id = v.gate_decision_id), 'active')
               ELSE status::text
           END AS status_at,
           repetitions - (
               SELECT count(*) FROM librarian_audit a
               WHERE a.record_id = v.record_id AND a.version_id = v.id
                 AND a.outcome = 'reinforced' AND a.decision_type <> 'self_healing'
                 AND a.occurred_at >= $6
                 -- a repetition above the version's level then counted nothing (write_path)
                 AND array_position({{levels}}, CASE
                         WHEN EXISTS (SELECT 1 FROM json_array_elements(a.layer1_checks) c
                                      WHERE c->>'name' = 'pii' AND c->>'quarantined' = 'true')
                         THEN 'sensitive'
                         ELSE a.input_snapshot #>> '{record,access_level}' END)
                     <= array_position({{levels}}, coalesce(
                         (SELECT r.input_snapshot->>'previous_level' FROM librarian_audit r
                          WHERE r.record_id = v.record_id AND r.version_id = v.id
                            AND r.action = 'RELEASE' AND r.occurred_at >= a.occurred_at
                          ORDER BY r.seq
                          LIMIT 1),
                         v.access_level))
           )::int AS repetitions_at
    FROM memories v
    WHERE namespace = $2 AND type = $3 AND ingestion_time < $6
      AND (ingestion_time_end IS NULL OR ingestion_time_end >= $6)
      AND gate_decision_id <> $7
)
(SELECT k.*, true AS exact, coalesce((1 - (k.embedding <=> $1))::float8, 1.0) AS similarity
 FROM known k
 WHERE k.content_hash = $4 AND k.status_at = 'active' AND k.access_level_at = ANY($9::text[])
 ORDER BY k.ingestion_time
 LIMIT 1)
UNION ALL
(SELECT k.*, false AS exact, (1 - (k.embedding <=> $1))::float8 AS similarity
 FROM known k
 WHERE k.status_at = 'active' AND k.embedding IS NOT NULL
   AND k.access_level_at = ANY($8::text[])
 ORDER BY (1 - (k.embedding <=> $1))::float8 DESC, k.id
 LIMIT $5)

-- name: replay_evidence_as_of
-- The cited ids ($1) that resolve_evidence found just before instant $2 (versions written by
-- decision $3 left out): a record id names the record's head then, any other id that version
-- if it was known; either way the record's head then had one of the access levels $4.
SELECT c.ref
FROM unnest($1::uuid[]) AS c(ref)
CROSS JOIN LATERAL (
    SELECT x.id, {{level_then}} AS level
    FROM memories x
    WHERE x.record_id = coalesce(
              (SELECT m.record_id FROM memories m WHERE m.record_id = c.ref LIMIT 1),
              (SELECT m.record_id FROM memories m WHERE m.id = c.ref))
      AND x.ingestion_time < $2 AND x.gate_decision_id <> $3
    ORDER BY x.version DESC
    LIMIT 1
) AS head
WHERE head.level = ANY($4::text[])
  AND (EXISTS (SELECT 1 FROM memories m WHERE m.record_id = c.ref)
       OR EXISTS (SELECT 1 FROM memories x
                  WHERE x.id = c.ref AND x.ingestion_time < $2 AND x.gate_decision_id <> $3
                    AND {{level_then}} = ANY($4::text[])))

-- name: count_window
-- Rows with $1 <= occurred_at < $2 (either bound may be NULL).
SELECT count(*) FROM librarian_audit
WHERE ($1::timestamptz IS NULL OR occurred_at >= $1)
  AND ($2::timestamptz IS NULL OR occurred_at < $2)
