-- SQL of read statistics (engram.memory_access).
--
-- One row per record; each statistic is an array of five elements, one per access level in
-- the order public, agent, user, system, sensitive. Element L counts the reads of the record's
-- versions at level L or below: the reads the readers of a head at L could have made. A head's
-- decay reads the element of its own level (temporal.sql), so it counts no read made of a
-- version kept above its readers (ADR-009); the daily cap applies to each element as it did
-- to the record, so no reader's decay gains more than DAILY_CAP reads a day.

-- name: record_reads
-- $1 record ids, $2 the access level of the version each read returned, $3 reads of each
-- since the last flush, $4 reads per day that reinforce. Rows go in record order, so two
-- kernels flushing at once lock them in one order.
WITH reads AS (
    SELECT r.record_id, r.n,
           array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'], r.level)
               AS rank
    FROM unnest($1::uuid[], $2::text[], $3::int[]) AS r(record_id, level, n)
), counted AS (
    SELECT record_id,
           ARRAY[coalesce(sum(n) FILTER (WHERE rank <= 1), 0),
                 coalesce(sum(n) FILTER (WHERE rank <= 2), 0),
                 coalesce(sum(n) FILTER (WHERE rank <= 3), 0),
                 coalesce(sum(n) FILTER (WHERE rank <= 4), 0),
                 coalesce(sum(n) FILTER (WHERE rank <= 5), 0)]::int[] AS n
    FROM reads
    GROUP BY record_id
)
INSERT INTO memory_access AS a
    (record_id, access_count, last_accessed_at, period_start, period_count, reinforcements)
SELECT c.record_id, c.n::bigint[],
       ARRAY(SELECT CASE WHEN e.n > 0 THEN now() END
             FROM unnest(c.n) WITH ORDINALITY AS e(n, i) ORDER BY e.i),
       current_date, c.n,
       ARRAY(SELECT least(e.n, $4)::float8
             FROM unnest(c.n) WITH ORDINALITY AS e(n, i) ORDER BY e.i)
FROM counted AS c
ORDER BY c.record_id
ON CONFLICT (record_id) DO UPDATE SET
    (access_count, last_accessed_at, period_count, reinforcements) = (
        SELECT array_agg(t.count + t.added ORDER BY t.i),
               array_agg(coalesce(t.read_now, t.read_last) ORDER BY t.i),
               array_agg(t.today ORDER BY t.i),
               array_agg(t.reinforced + least(t.today, $4) - least(t.today - t.added, $4)
                         ORDER BY t.i)
        FROM (
            SELECT u.*, CASE WHEN a.period_start = excluded.period_start
                             THEN u.period + u.added ELSE u.added END AS today
            FROM unnest(a.access_count, excluded.period_count, a.last_accessed_at,
                        excluded.last_accessed_at, a.period_count, a.reinforcements)
                 WITH ORDINALITY AS u(count, added, read_last, read_now, period, reinforced, i)
        ) AS t
    ),
    period_start = excluded.period_start
