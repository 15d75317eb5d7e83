-- SQL of hybrid retrieval (reads engram.memories, writes engram.memory_feedback).
-- Every leg takes: $2 namespace, $3 types (NULL: all), $4 readable access levels,
-- $5 statuses left out, $6 depth of the leg (rows it returns).

-- fragment: heads
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[]) AND NOT (status::text = ANY($5::text[]))
AND superseded_by IS NULL

-- fragment: versions
-- Versions instead of heads: $7 ingestion instant T (NULL: any), $8 event instant E (NULL: any).
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[]) AND NOT (status::text = ANY($5::text[]))
AND ($7::timestamptz IS NULL
     OR (ingestion_time <= $7 AND (ingestion_time_end IS NULL OR ingestion_time_end > $7)))
AND ($8::timestamptz IS NULL OR event_time <= $8)

-- fragment: rare_words
-- The stemmed words of $1, any of them (OR), leaving out words that the planner's statistics
-- (most_common_elems of content_tsv, kept by ANALYZE) estimate in more than 1,000 versions:
-- such words barely rank (a cut-off on document frequency) and each would make the leg read
-- and rank a thousand rows or more. A small store keeps all its words; a query made only of
-- common words has no text leg. The 'simple' configuration keeps stemmed lexemes as they are.
to_tsquery('simple', coalesce((
    SELECT string_agg(quote_literal(w.lexeme), ' | ')
    FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS w(lexeme)
    WHERE w.lexeme NOT IN (
        SELECT e.lexeme
        FROM pg_stats AS s,
             unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, freq)
        WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
          AND s.attname = 'content_tsv' AND e.lexeme IS NOT NULL
          AND e.freq * (SELECT c.reltuples FROM pg_class AS c WHERE c.oid = 'memories'::regclass)
              > 1000
    )
), ''))

-- name: vector_heads
-- $1 the query embedding; nearest first (memories_embedding_hnsw_idx, iterative scan).
SELECT id, record_id FROM memories
WHERE embedding IS NOT NULL AND {{heads}}
ORDER BY embedding <=> $1::vector
LIMIT $6

-- name: text_heads
-- $1 the query text; versions holding any of its distinctive words, by cover density.
SELECT m.id, m.record_id FROM memories m, {{rare_words}} AS q
WHERE m.content_tsv @@ q AND {{heads}}
ORDER BY ts_rank_cd(m.content_tsv, q) DESC, m.ingestion_time DESC
LIMIT $6

-- name: vector_versions
SELECT id, record_id FROM memories
WHERE embedding IS NOT NULL AND {{versions}}
ORDER BY embedding <=> $1::vector
LIMIT $6

-- name: text_versions
SELECT m.id, m.record_id FROM memories m, {{rare_words}} AS q
WHERE m.content_tsv @@ q AND {{versions}}
ORDER BY ts_rank_cd(m.content_tsv, q) DESC, m.ingestion_time DESC
LIMIT $6

-- name: insert_feedback
INSERT INTO memory_feedback (record_id, version_id, agent_id, useful, signal)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, created_at

-- name: feedback_summary
SELECT count(*) FILTER (WHERE useful) AS useful, count(*) FILTER (WHERE NOT useful) AS not_useful
FROM memory_feedback WHERE record_id = $1
