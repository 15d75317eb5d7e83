-- A reader's version numbers (engram.memory.temporal.numbering, ADR-009 amended 2026-11-27):
-- the versions of a record a caller may read, numbered 1, 2, 3... without a gap.

-- name: reader_versions
-- Every version of the records $1 (one index range each), and whether a reader of the access
-- levels $2 may read it: what its numbers, successors and known-until instants are made of.
SELECT v.record_id, v.id, v.version, v.ingestion_time,
       v.access_level = ANY($2::text[]) AS readable
FROM memories v
WHERE v.record_id = ANY($1::uuid[])
ORDER BY v.record_id, v.version

-- name: reader_number
-- The number a reader of the access levels $3 gives version $2 of record $1: the versions up to
-- it that it may read (the version itself counted whether or not it may read it).
SELECT count(*) FILTER (WHERE v.access_level = ANY($3::text[]) OR v.version = $2)::int
FROM memories v
WHERE v.record_id = $1 AND v.version <= $2
