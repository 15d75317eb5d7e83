-- SQL of the version aggregate (engram.memories, engram.memory_edges).

-- fragment: record_columns
id, record_id, version, type, content, metadata, superseded_by, source_agent,
source_confidence, evidence_links, event_time, event_time_end, ingestion_time,
ingestion_time_end, access_level, classification, gate_decision_id, gate_decision_type,
expected_version, namespace, status::text AS status, consolidation_path, decay_score,
created_at, updated_at, importance, repetitions

-- name: head
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1 AND superseded_by IS NULL

-- name: head_for_update
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1 AND superseded_by IS NULL
FOR UPDATE

-- name: exact_duplicate
-- $4 the access levels the writer may read: what it may not read is absent for it.
SELECT {{record_columns}}, 1.0::float8 AS similarity
FROM memories
WHERE namespace = $1 AND type = $2 AND content_hash = $3
  AND superseded_by IS NULL AND status = 'active' AND access_level = ANY($4::text[])
ORDER BY ingestion_time
LIMIT 1

-- name: candidates
-- The exact duplicate (same normalised content) and the nearest active heads, in one trip,
-- among the records the writer may read ($6, its access levels).
(SELECT {{record_columns}}, true AS exact,
        coalesce((1 - (embedding <=> $1))::float8, 1.0) AS similarity
 FROM memories
 WHERE namespace = $2 AND type = $3 AND content_hash = $4
   AND superseded_by IS NULL AND status = 'active' AND access_level = ANY($6::text[])
 ORDER BY ingestion_time
 LIMIT 1)
UNION ALL
(SELECT {{record_columns}}, false AS exact, (1 - (embedding <=> $1))::float8 AS similarity
 FROM memories
 WHERE namespace = $2 AND type = $3 AND superseded_by IS NULL AND status = 'active'
   AND embedding IS NOT NULL AND access_level = ANY($6::text[])
 ORDER BY embedding <=> $1
 LIMIT $5)

-- name: resolve_evidence
-- Each cited id of $1 names a record (its head: a record's first version shares its id) or
-- else one version. $2 the access levels the writer may read: a record whose head it may not
-- read is absent for it, whichever of its versions is cited.
SELECT r.ref, coalesce(h.id, v.id) AS version_id
FROM unnest($1::uuid[]) AS r(ref)
LEFT JOIN memories h ON h.record_id = r.ref AND h.superseded_by IS NULL
LEFT JOIN memories v ON h.id IS NULL AND v.id = r.ref
LEFT JOIN memories vh ON vh.record_id = v.record_id AND vh.superseded_by IS NULL
WHERE (h.id IS NOT NULL AND h.access_level = ANY($2::text[]))
   OR (h.id IS NULL AND v.access_level = ANY($2::text[]) AND vh.access_level = ANY($2::text[]))

-- name: insert_version
INSERT INTO memories (
    id, record_id, version, type, content, metadata, source_agent, source_confidence,
    evidence_links, event_time, ingestion_time, access_level, classification,
    gate_decision_id, gate_decision_type, expected_version, namespace, status,
    consolidation_path, importance, content_hash, embedding, embedding_model,
    created_at, updated_at, event_time_end
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()),
    greatest(now(), coalesce($11, now())), $12, $13, $14, $15, $16, $17, $23::engram.memory_status,
    $18, $19, $20, $21, $22, now(), now(), $24
)
RETURNING {{record_columns}}

-- name: close_head
UPDATE memories
SET superseded_by = $2,
    ingestion_time_end = greatest(now(), ingestion_time),
    status = 'superseded',
    updated_at = now()
WHERE id = $1 AND superseded_by IS NULL
RETURNING ingestion_time_end

-- name: forget_head
UPDATE memories
SET ingestion_time_end = greatest(now(), ingestion_time),
    event_time_end = greatest(now(), event_time),
    status = 'forgotten',
    updated_at = now()
WHERE id = $1 AND superseded_by IS NULL AND status <> 'forgotten'
RETURNING ingestion_time_end

-- name: reinforce
UPDATE memories
SET repetitions = repetitions + 1,
    last_reinforced_at = now(),
    embedding = coalesce(embedding, $2),
    embedding_model = CASE WHEN embedding IS NULL THEN $3 ELSE embedding_model END
WHERE id = $1
RETURNING repetitions

-- name: fill_embedding
UPDATE memories
SET embedding = $2, embedding_model = $3
WHERE id = $1 AND embedding IS NULL
RETURNING id

-- name: unembedded_heads
SELECT {{record_columns}}
FROM memories
WHERE embedding IS NULL AND superseded_by IS NULL AND status = 'active'
ORDER BY ingestion_time
LIMIT $1

-- name: insert_edge
INSERT INTO memory_edges (source_id, target_id, kind, weight, provenance, decision_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (source_id, target_id, kind) DO NOTHING

-- name: record_standing
-- The tier of the agent whose write gave record $1 its current content: the writer of the
-- newest version that changed the (normalised) content of the version before it, or created
-- the record. A change of metadata or level alone lends no standing. NULL when that version
-- came from an internal origin (consolidation), which stands as trusted.
SELECT CASE WHEN v.gate_decision_type = 'external' THEN a.caller->>'trust_level' END
           AS trust_level
FROM memories v
JOIN librarian_audit a ON a.decision_id = v.gate_decision_id
LEFT JOIN memories p ON p.record_id = v.record_id AND p.version = v.version - 1
WHERE v.record_id = $1 AND (p.id IS NULL OR p.content_hash IS DISTINCT FROM v.content_hash)
ORDER BY v.version DESC
LIMIT 1

-- name: count_heads
SELECT type, consolidation_path, count(*)::bigint AS n
FROM memories
WHERE superseded_by IS NULL AND status <> 'forgotten'
GROUP BY type, consolidation_path

-- name: version_by_id
SELECT {{record_columns}}
FROM memories
WHERE id = $1

-- name: version_chain
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1
ORDER BY version

-- The as-of reads. $2 is the ingestion instant T (what the kernel knew), $3 the event instant
-- E (what was true in the world; NULL: no event filter), $4 the statuses that end a record
-- (forgotten, consolidated) unless asked for, $5 the access levels the reader may see.
-- One rule for record reads and every listing (ADR-009, amended 2026-11-25): the version
-- answering (T, E) is the newest version known at T whose event time is at or before E,
-- provided its validity had not ended by E. Without E nothing is filtered on the event axis
-- (what the kernel believes, ended or future validity alike). An end of validity written with
-- the version counts from its ingestion; one written by FORGET counts only from the forget (the
-- end of its ingestion interval) on. Only heads carry an ending status (close_head re-marks a
-- superseded version); it ends its record from when the head got it: the end of its ingestion
-- interval when it was re-marked in place (FORGET), its ingestion when it was written with it.

-- fragment: known_began
v.ingestion_time <= $2 AND ($3::timestamptz IS NULL OR v.event_time <= $3)

-- fragment: still_valid
($3::timestamptz IS NULL OR v.event_time_end IS NULL OR $3 < v.event_time_end
 OR (v.status = 'forgotten' AND v.ingestion_time_end > $2))

-- fragment: not_ended
NOT EXISTS (
    SELECT 1 FROM memories e
    WHERE e.record_id = v.record_id AND e.status::text = ANY($4::text[])
      AND coalesce(e.ingestion_time_end, e.ingestion_time) <= $2
)

-- A record is read only while the caller may read its head (now): one whose head is hidden
-- from it is absent for it at every instant, as in temporal.current and the version chain.
-- fragment: head_readable
EXISTS (
    SELECT 1 FROM memories h
    WHERE h.record_id = v.record_id AND h.superseded_by IS NULL
      AND h.access_level = ANY($5::text[])
)

-- name: as_of_record
SELECT v.*
FROM (
    SELECT {{record_columns}}
    FROM memories v
    WHERE v.record_id = $1 AND {{known_began}}
    ORDER BY v.version DESC
    LIMIT 1
) AS v
WHERE {{still_valid}} AND {{not_ended}} AND v.access_level = ANY($5::text[])
  AND {{head_readable}}

-- name: as_of_history
SELECT {{record_columns}}
FROM memories v
WHERE v.record_id = $1 AND {{known_began}} AND {{not_ended}}
  AND v.access_level = ANY($5::text[]) AND {{head_readable}}
ORDER BY v.version

-- name: as_of_listing
-- $1 namespace, $6 one type, $7 limit. Versions of the type are scanned back from T
-- (memories_listing_idx); the one whose ingestion interval contains T witnesses that its record
-- existed then (one per record), and for it the version answering (T, E) is picked.
SELECT v.*
FROM memories w
CROSS JOIN LATERAL (
    SELECT {{record_columns}}
    FROM memories v
    WHERE v.record_id = w.record_id AND {{known_began}}
    ORDER BY v.version DESC
    LIMIT 1
) AS v
WHERE w.namespace = $1 AND w.type = $6 AND w.ingestion_time <= $2
  AND (w.ingestion_time_end IS NULL OR w.ingestion_time_end > $2
       -- an ended record (forgotten) still answers when its ending is not excluded
       OR (w.superseded_by IS NULL AND NOT (w.status::text = ANY($4::text[]))))
  -- a head written with an excluded ending status (consolidated) ended its record when written
  AND NOT (w.ingestion_time_end IS NULL AND w.status::text = ANY($4::text[]))
  AND {{still_valid}} AND v.access_level = ANY($5::text[]) AND {{head_readable}}
ORDER BY w.ingestion_time DESC
LIMIT $7

-- name: as_of_event_listing
-- $1 namespace, $6 one type, $7 limit. Versions that began by E and were known by T, newest
-- event first (memories_event_listing_idx); a version answers for its record when no later
-- version known by T also began by E.
SELECT {{record_columns}}
FROM memories v
WHERE v.namespace = $1 AND v.type = $6 AND {{known_began}} AND {{still_valid}}
  AND NOT EXISTS (
      SELECT 1 FROM memories n
      WHERE n.record_id = v.record_id AND n.version > v.version
        AND n.ingestion_time <= $2 AND n.event_time <= $3
  )
  AND {{not_ended}}
  AND v.access_level = ANY($5::text[]) AND {{head_readable}}
ORDER BY v.event_time DESC
LIMIT $7

-- name: current_listing
-- The common case (now, no event instant): the heads themselves, newest change first. As in
-- as_of_record without E, validity is not filtered (an ended or future event interval is
-- still believed); a head with an excluded ending status ended its record by now.
SELECT {{record_columns}}
FROM memories v
WHERE v.namespace = $1 AND v.superseded_by IS NULL AND v.type = $4
  AND NOT (v.status::text = ANY($2::text[]))
  AND v.access_level = ANY($3::text[])
ORDER BY v.ingestion_time DESC
LIMIT $5

-- name: decay_inputs
SELECT h.type, h.importance, h.ingestion_time AS head_ingested,
       (SELECT min(f.ingestion_time) FROM memories f WHERE f.record_id = h.record_id)
           AS first_ingested,
       a.last_accessed_at, a.reinforcements
FROM memories h
LEFT JOIN memory_access a ON a.record_id = h.record_id
WHERE h.record_id = $1 AND h.superseded_by IS NULL

-- name: versions_by_ids
-- $1 version ids, $2 the access levels the reader may see.
SELECT {{record_columns}}
FROM memories
WHERE id = ANY($1::uuid[]) AND access_level = ANY($2::text[])

-- name: quarantined
-- Heads held at ``sensitive`` by the PII check, oldest first, after sequence cursor $1.
SELECT {{record_columns}}
FROM memories
WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'
  AND status <> 'forgotten' AND ingestion_time > $1
ORDER BY ingestion_time
LIMIT $2

-- name: release
UPDATE memories SET access_level = $2, updated_at = now()
WHERE id = $1
RETURNING {{record_columns}}

-- Audit replay (engram.memory.replay) and audit state (engram.memory.audit_state): the
-- versions as a decision found them. $T is the decision's instant; versions written by the
-- decision itself are left out. A version's status and access level are changed in place
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

-- name: replay_candidates_as_of
-- What `candidates` returned just before instant $6: $1 embedding (NULL: use the exact row only),
-- $2 namespace, $3 type, $4 content hash, $5 limit, $7 the decision, $8 the access levels the
-- writer could read. A version counts when it was known and not yet ended at $6, its status
-- then was active and its access level then was one of $8; its repetitions then are today's
-- minus the reinforcements recorded since.
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
           )::int AS repetitions_at
    FROM memories v
    WHERE namespace = $2 AND type = $3 AND ingestion_time < $6
      AND (ingestion_time_end IS NULL OR ingestion_time_end >= $6)
      AND gate_decision_id <> $7
)
(SELECT k.*, true AS exact, coalesce((1 - (k.embedding <=> $1))::float8, 1.0) AS similarity
 FROM known k
 WHERE k.content_hash = $4 AND k.status_at = 'active' AND k.access_level_at = ANY($8::text[])
 ORDER BY k.ingestion_time
 LIMIT 1)
UNION ALL
(SELECT k.*, false AS exact, (1 - (k.embedding <=> $1))::float8 AS similarity
 FROM known k
 WHERE k.status_at = 'active' AND k.embedding IS NOT NULL
   AND k.access_level_at = ANY($8::text[])
 ORDER BY k.embedding <=> $1
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

-- name: namespaces_as_of
SELECT DISTINCT namespace FROM memories WHERE ingestion_time <= $1 ORDER BY namespace

-- name: stored_embedding
-- $2 the model in use: a vector of another model is not reused.
SELECT embedding FROM memories WHERE id = $1 AND embedding_model = $2
