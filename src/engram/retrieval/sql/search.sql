-- SQL of hybrid retrieval (reads engram.memories, writes engram.memory_feedback).
-- Every leg takes: $2 namespace, $3 types (NULL: all), $4 readable access levels,
-- $5 statuses left out, $6 depth of the leg (rows it returns), $7 tags a version must all
-- carry in metadata.tags (NULL: no tag filter). The caller's access levels filter inside each
-- leg, so a version the caller may not read never takes a place in a ranking.

-- fragment: heads
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[]) AND NOT (status::text = ANY($5::text[]))
AND ($7::text[] IS NULL OR metadata->'tags' ?& $7::text[])
AND superseded_by IS NULL

-- fragment: versions
-- Versions instead of heads: $8 ingestion instant T (NULL: any), $9 event instant E (NULL: any).
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[]) AND NOT (status::text = ANY($5::text[]))
AND ($7::text[] IS NULL OR metadata->'tags' ?& $7::text[])
AND ($8::timestamptz IS NULL
     OR (ingestion_time <= $8 AND (ingestion_time_end IS NULL OR ingestion_time_end > $8)))
AND ($9::timestamptz IS NULL OR event_time <= $9)

-- fragment: rare_words
-- The stemmed words of $1, any of them (OR), leaving out words that the planner's statistics
-- (most_common_elems of content_tsv, kept by ANALYZE) estimate in more than 2 % of the versions
-- (at least 100, at most 1,000 versions): such words barely rank (a cut-off on document
-- frequency) and would make the leg read and rank much of the table. A query made only of
-- common words has no text leg; until ANALYZE has run nothing is left out. The 'simple'
-- configuration keeps the stemmed lexemes as they are.
to_tsquery('simple', coalesce((
    SELECT string_agg(quote_literal(w.lexeme), ' | ')
    FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS w(lexeme)
    WHERE w.lexeme NOT IN (
        SELECT e.lexeme
        FROM pg_stats AS s, pg_class AS c,
             unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, freq)
        WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
          AND s.attname = 'content_tsv' AND c.oid = 'memories'::regclass
          AND e.lexeme IS NOT NULL
          AND e.freq * c.reltuples > greatest(100, least(1000, 0.02 * c.reltuples))
    )
), ''))

-- name: vector_heads
-- $1 the query embedding; nearest first (memories_embedding_hnsw_idx, iterative scan), with
-- each one's cosine distance.
SELECT id, record_id, embedding <=> $1::vector AS distance FROM memories
WHERE embedding IS NOT NULL AND {{heads}}
ORDER BY embedding <=> $1::vector
LIMIT $6

-- name: text_heads
-- $1 the query text; versions holding any of its distinctive words, by cover density. At most
-- 2,000 matches are ranked, so a query of many middling words stays cheap.
SELECT t.id, t.record_id
FROM {{rare_words}} AS q,
     LATERAL (SELECT m.id, m.record_id, m.content_tsv, m.ingestion_time
              FROM memories m
              WHERE m.content_tsv @@ q AND {{heads}}
              LIMIT 2000) AS t
ORDER BY ts_rank_cd(t.content_tsv, q) DESC, t.ingestion_time DESC
LIMIT $6

-- name: vector_versions
SELECT id, record_id, embedding <=> $1::vector AS distance FROM memories
WHERE embedding IS NOT NULL AND {{versions}}
ORDER BY embedding <=> $1::vector
LIMIT $6

-- name: text_versions
SELECT t.id, t.record_id
FROM {{rare_words}} AS q,
     LATERAL (SELECT m.id, m.record_id, m.content_tsv, m.ingestion_time
              FROM memories m
              WHERE m.content_tsv @@ q AND {{versions}}
              LIMIT 2000) AS t
ORDER BY ts_rank_cd(t.content_tsv, q) DESC, t.ingestion_time DESC
LIMIT $6

-- name: distances
-- Cosine distance of the embedding $1 to the versions $2 (found by the text leg alone) that
-- have an embedding and that the caller may read ($3).
SELECT id, embedding <=> $1::vector AS distance
FROM memories
WHERE id = ANY($2::uuid[]) AND embedding IS NOT NULL AND access_level = ANY($3::text[])

-- name: insert_feedback
INSERT INTO memory_feedback (record_id, version_id, agent_id, useful, signal)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, created_at
