-- SQL of read statistics (engram.memory_access).

-- name: record_reads
-- $1 record ids, $2 reads of each since the last flush, $3 reads per day that reinforce.
INSERT INTO memory_access AS a
    (record_id, access_count, last_accessed_at, period_start, period_count, reinforcements)
SELECT r.record_id, r.n, now(), current_date, r.n, least(r.n, $3)
FROM unnest($1::uuid[], $2::int[]) AS r(record_id, n)
ON CONFLICT (record_id) DO UPDATE SET
    access_count = a.access_count + excluded.access_count,
    last_accessed_at = excluded.last_accessed_at,
    period_start = excluded.period_start,
    period_count = CASE WHEN a.period_start = excluded.period_start
                        THEN a.period_count + excluded.period_count
                        ELSE excluded.period_count END,
    reinforcements = a.reinforcements
        + least(CASE WHEN a.period_start = excluded.period_start
                     THEN a.period_count + excluded.period_count
                     ELSE excluded.period_count END, $3)
        - CASE WHEN a.period_start = excluded.period_start THEN least(a.period_count, $3)
               ELSE 0 END

