-- Bi-temporal reads (engram.memory.temporal): as-of records, histories and listings.

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
-- Skipped when v is the head (already checked) and for a reader of sensitive records (who reads
-- every level). A scalar subquery on the one-head index, per row: written as EXISTS, the
-- planner turns it into a hashed scan of every head, which grows with the table.
(v.superseded_by IS NULL OR 'sensitive' = ANY($5::text[]) OR (
    SELECT h.access_level FROM memories h
    WHERE h.record_id = v.record_id AND h.superseded_by IS NULL
) = ANY($5::text[]))

-- The level of each row's head, read in the row's own snapshot: a read of an older version
-- counts for the readers of both (reads.sql), and a head lowered in place after the read (a
-- quarantine release) must not lower the level the read counts at. One probe of the one-head
-- index per older version; a head is its own.
-- fragment: head_level
CASE WHEN v.superseded_by IS NULL THEN v.access_level::text ELSE (
    SELECT h.access_level::text FROM memories h
    WHERE h.record_id = v.record_id AND h.superseded_by IS NULL
) END AS head_level

-- name: as_of_record
-- The reader's history is the versions it may read (ADR-009, amended 2026-11-27): the newest
-- of those known at T answers, a hidden version known later left out as if never written.
SELECT v.*, {{head_level}}
FROM (
    SELECT {{record_columns}}
    FROM memories v
    WHERE v.record_id = $1 AND {{known_began}} AND v.access_level = ANY($5::text[])
    ORDER BY v.version DESC
    LIMIT 1
) AS v
WHERE {{still_valid}} AND {{not_ended}} AND {{head_readable}}

-- name: as_of_history
SELECT {{record_columns}}, {{head_level}}
FROM memories v
WHERE v.record_id = $1 AND {{known_began}} AND {{not_ended}}
  AND v.access_level = ANY($5::text[]) AND {{head_readable}}
ORDER BY v.version

-- name: as_of_listing
-- $1 namespace, $6 one type, $7 limit. Versions of the type are scanned back from T
-- (memories_listing_idx); the one the caller may read whose ingestion interval contains T, as
-- the caller sees it (until the next version it may read), witnesses that its record existed
-- then (one per record), and for it the version answering (T, E) is picked.
SELECT v.*, {{head_level}}
FROM memories w
CROSS JOIN LATERAL (
    SELECT {{record_columns}}
    FROM memories v
    WHERE v.record_id = w.record_id AND {{known_began}} AND v.access_level = ANY($5::text[])
    ORDER BY v.version DESC
    LIMIT 1
) AS v
WHERE w.namespace = $1 AND w.type = $6 AND w.ingestion_time <= $2
  AND w.access_level = ANY($5::text[])
  AND (w.ingestion_time_end IS NULL OR w.ingestion_time_end > $2
       -- an ended record (forgotten) still answers when its ending is not excluded
       OR (w.superseded_by IS NULL AND NOT (w.status::text = ANY($4::text[])))
       -- the caller's view: a version is known until the next one it may read was written
       OR (w.superseded_by IS NOT NULL AND 'sensitive' <> ALL($5::text[]) AND NOT EXISTS (
           SELECT 1 FROM memories n
           WHERE n.record_id = w.record_id AND n.version > w.version
             AND n.ingestion_time <= $2 AND n.access_level = ANY($5::text[]))))
  -- a head written with an excluded ending status (consolidated) ended its record when written
  AND NOT (w.ingestion_time_end IS NULL AND w.status::text = ANY($4::text[]))
  AND {{still_valid}} AND {{head_readable}}
ORDER BY w.ingestion_time DESC
LIMIT $7

-- name: as_of_event_listing
-- $1 namespace, $6 one type, $7 limit. Versions that began by E and were known by T, newest
-- event first (memories_event_listing_idx); a version answers for its record when no later
-- version known by T also began by E.
-- The head check runs on the versions that answer (after the anti-joins), not on every one
-- scanned: OFFSET 0 keeps the planner from pushing it into the scan.
SELECT v.*, {{head_level}}
FROM (
    SELECT {{record_columns}}
    FROM memories v
    WHERE v.namespace = $1 AND v.type = $6 AND {{known_began}} AND {{still_valid}}
      AND NOT EXISTS (
          SELECT 1 FROM memories n
          WHERE n.record_id = v.record_id AND n.version > v.version
            AND n.ingestion_time <= $2 AND n.event_time <= $3
            AND n.access_level = ANY($5::text[])
      )
      AND {{not_ended}}
      AND v.access_level = ANY($5::text[])
    ORDER BY v.event_time DESC
    OFFSET 0
) AS v
WHERE {{head_readable}}
ORDER BY v.event_time DESC
LIMIT $7

-- name: current_listing
-- The common case (now, no event instant): the heads themselves, newest change first. As in
-- as_of_record without E, validity is not filtered (an ended or future event interval is
-- still believed); a head with an excluded ending status ended its record by now.
-- $6: tags a head must all carry in metadata.tags (NULL: any). $7, $8: a page's end, the
-- (ingestion time, id) of the last head already listed (NULL: from the newest).
SELECT {{record_columns}}
FROM memories v
WHERE v.namespace = $1 AND v.superseded_by IS NULL AND v.type = $4
  AND NOT (v.status::text = ANY($2::text[]))
  AND v.access_level = ANY($3::text[])
  AND ($6::text[] IS NULL OR v.metadata->'tags' ?& $6::text[])
  -- the first comparison alone is what the index can seek to; the pair breaks ties
  AND ($7::timestamptz IS NULL
       OR (v.ingestion_time <= $7 AND (v.ingestion_time, v.id) < ($7::timestamptz, $8::uuid)))
ORDER BY v.ingestion_time DESC, v.id DESC
LIMIT $5

-- A record ages from its first version that every reader of its head may read (at or below
-- the head's level): one kept above that level before (a record raised, or stored sensitive,
-- and lowered since) is no part of the history those readers are shown (ADR-009), and its
-- age would tell them it existed (hostile pass AD).
-- fragment: first_ingested
(SELECT min(f.ingestion_time) FROM memories f
 WHERE f.record_id = h.record_id
   AND array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'], f.access_level::text)
       <= array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'], h.access_level::text))

-- Reads, like age, count only for what every reader of the head may read: the element of
-- the head's level counts the reads of versions at or below it (reads.sql, ADR-009).
-- fragment: reads_at_head_level
a.last_accessed_at[array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'],
                                  h.access_level::text)] AS last_accessed_at,
a.reinforcements[array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'],
                                h.access_level::text)] AS reinforcements

-- name: decay_inputs
SELECT h.type, h.importance, h.ingestion_time AS head_ingested,
       coalesce({{first_ingested}}, h.ingestion_time) AS first_ingested,
       {{reads_at_head_level}}
FROM memories h
LEFT JOIN memory_access a ON a.record_id = h.record_id
WHERE h.record_id = $1 AND h.superseded_by IS NULL

-- name: versions_by_ids
-- $1 version ids, $2 the access levels the reader may see; a version of a record whose head
-- the reader may not see is left out (the head_readable rule, with $2 for the levels).
SELECT {{record_columns}}
FROM memories v
WHERE v.id = ANY($1::uuid[]) AND v.access_level = ANY($2::text[])
  AND (v.superseded_by IS NULL OR 'sensitive' = ANY($2::text[]) OR (
      SELECT h.access_level FROM memories h
      WHERE h.record_id = v.record_id AND h.superseded_by IS NULL
  ) = ANY($2::text[]))

-- name: decay_page
-- Live heads after record $1 in record-id order ($2 at most), with what decay reads.
SELECT h.id, h.record_id, h.type, h.importance, h.decay_score, h.access_level::text AS access_level,
       h.ingestion_time AS head_ingested,
       coalesce({{first_ingested}}, h.ingestion_time) AS first_ingested,
       {{reads_at_head_level}}
FROM memories h
LEFT JOIN memory_access a ON a.record_id = h.record_id
WHERE h.superseded_by IS NULL AND h.status IN ('active', 'challenged') AND h.record_id > $1
ORDER BY h.record_id
LIMIT $2

-- name: store_decay
-- Only scores that moved are written (a refresh of an unchanged store writes nothing), and
-- only on a row still at the level $3 each was computed for: a quarantine release lowering
-- it in place since the page was read restated its score at the new level (ADR-009).
UPDATE memories m SET decay_score = d.score
FROM unnest($1::uuid[], $2::real[], $3::text[]) AS d(id, score, level)
WHERE m.id = d.id AND m.access_level::text = d.level AND abs(m.decay_score - d.score) >= 0.001

-- name: head_levels
-- The access level of the heads of records $1: a read of an older version counts for the
-- readers of both (reads.sql).
SELECT record_id, access_level::text AS access_level
FROM memories
WHERE record_id = ANY($1::uuid[]) AND superseded_by IS NULL

-- name: store_head_decay
-- $2 the decay score of record $1's head, recomputed after its level changed in place.
UPDATE memories SET decay_score = $2
WHERE record_id = $1 AND superseded_by IS NULL
