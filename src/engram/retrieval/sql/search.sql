-- SQL of hybrid retrieval (reads engram.memories; ratings are in feedback.sql).
-- Every leg takes: $2 namespace, $3 types (NULL: all), $4 readable access levels,
-- $5 statuses left out, $6 depth of the leg (rows it returns), $7 tags a version must all
-- carry in metadata.tags (NULL: no tag filter). The caller's access levels filter inside each
-- leg, so a version the caller may not read never takes a place in a ranking.
-- A query's text is parsed as memories.content_tsv parses content (migration 0019): a space
-- after every 255 characters without one, so a crafted run costs the parser little.

-- fragment: heads
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[]) AND NOT (status::text = ANY($5::text[]))
AND ($7::text[] IS NULL OR metadata->'tags' ?& $7::text[])
AND superseded_by IS NULL

-- fragment: versions
-- Versions instead of heads: $8 ingestion instant T (NULL: any), $9 event instant E (NULL: any).
-- A version's own status is not filtered: a FORGET marks the head it ends, which is what an
-- instant before the forget must still find; the record's end is the rule below.
namespace = $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
AND access_level = ANY($4::text[])
AND ($7::text[] IS NULL OR metadata->'tags' ?& $7::text[])
-- known at T as the caller sees it: until the next version it may read (ADR-009, amended
-- 2026-11-27), so a version followed by hidden ones only is known past their instants
AND ($8::timestamptz IS NULL
     OR (ingestion_time <= $8 AND (ingestion_time_end IS NULL OR ingestion_time_end > $8
         OR ('sensitive' <> ALL($4::text[]) AND NOT EXISTS (
             SELECT 1 FROM memories n
             WHERE n.record_id = m.record_id AND n.version > m.version
               AND n.ingestion_time <= $8 AND n.access_level = ANY($4::text[]))))))
AND ($9::timestamptz IS NULL OR event_time <= $9)
-- a record that ended ($5: forgotten, or consolidated unless asked for) by the instant asked
-- ($8, else now) is absent then, every version of it, as temporal.sql's not_ended says; a
-- scalar subquery per row on the record's versions (as NOT EXISTS the planner may hash every
-- ended version of the table instead)
AND coalesce((
    SELECT min(coalesce(e.ingestion_time_end, e.ingestion_time)) FROM memories e
    WHERE e.record_id = m.record_id AND e.status::text = ANY($5::text[])
) > coalesce($8::timestamptz, now()), true)
-- a record whose head the caller may not read is absent at every instant (temporal.sql)
AND (superseded_by IS NULL OR 'sensitive' = ANY($4::text[]) OR (
    SELECT h.access_level FROM memories h
    WHERE h.record_id = m.record_id AND h.superseded_by IS NULL
) = ANY($4::text[]))

-- fragment: terms
-- The query's distinctive terms ($1, chosen by engram.retrieval.terms from the query text
-- alone), stemmed as the stored content is, any of them (OR). Nothing about the stored records
-- decides which words take part: table statistics would count versions the caller may not
-- read. The 'simple' configuration keeps the stemmed lexemes as they are.
to_tsquery('simple', coalesce((
    SELECT string_agg(quote_literal(w.lexeme), ' | ')
    FROM unnest(tsvector_to_array(to_tsvector('english', regexp_replace($1, '(\S{255})', '\1 ', 'g')))) AS w(lexeme)
), ''))

-- name: vector_heads
-- $1 the query embedding; nearest first (memories_embedding_hnsw_idx, iterative scan), with
-- each one's cosine distance. Equal distances (one content) are ordered by id: left to the
-- scan, their order followed the table's layout, which versions the caller may not read
-- shape too (hostile pass J).
SELECT n.id, n.record_id, n.distance
FROM (SELECT id, record_id, embedding <=> $1::vector AS distance FROM memories
      WHERE embedding IS NOT NULL AND {{heads}}
      ORDER BY embedding <=> $1::vector
      LIMIT $6) AS n
ORDER BY n.distance, n.id

-- name: vector_heads_words
-- vector_heads and, for each version, what the evidence lookup below brings: the query's
-- words ($8, stemmed as the content is), those of them the version holds, the distance of
-- the model's own query embedding ($9; $1 is the adapted one the search orders by) and the
-- version's type. One round trip for a search of current heads that weighs the words (the
-- default); the inner query is vector_heads's (it also selects content_tsv and type), so the
-- planner keeps its index scan.
SELECT n.id, n.record_id, n.distance, n.raw_distance, n.type, q.words,
       ARRAY(SELECT w.word FROM unnest(q.words, q.queries) AS w(word, query)
             WHERE n.content_tsv @@ w.query) AS matched
FROM (SELECT id, record_id, content_tsv, type, embedding <=> $1::vector AS distance,
             embedding <=> $9::vector AS raw_distance FROM memories
      WHERE embedding IS NOT NULL AND {{heads}}
      ORDER BY embedding <=> $1::vector
      LIMIT $6) AS n,
     (SELECT s.words, ARRAY(SELECT quote_literal(x)::tsquery FROM unnest(s.words) AS x) AS queries
      FROM (SELECT tsvector_to_array(to_tsvector('english', regexp_replace($8, '(\S{255})', '\1 ', 'g'))) AS words) AS s) AS q
ORDER BY n.distance, n.id

-- name: text_heads
-- $1 the query's distinctive terms; versions holding any of them, by cover density, each with
-- how many matched (counting stops at 201: terms held by more than 200 versions the caller may
-- read are not rare for it, and the caller drops the leg; engram.retrieval.search).
SELECT t.id, t.record_id, count(*) OVER () AS matches
FROM {{terms}} AS q,
     LATERAL (SELECT m.id, m.record_id, m.content_tsv, m.ingestion_time
              FROM memories m
              WHERE m.content_tsv @@ q AND {{heads}}
              LIMIT 201) AS t
ORDER BY ts_rank_cd(t.content_tsv, q) DESC, t.ingestion_time DESC, t.id
LIMIT $6

-- name: vector_versions
-- As vector_heads; equal distances by record, then newest version first (the versions of
-- one record restated unchanged share an embedding).
SELECT n.id, n.record_id, n.distance
FROM (SELECT m.id, m.record_id, m.version, m.embedding <=> $1::vector AS distance
      FROM memories m
      WHERE m.embedding IS NOT NULL AND {{versions}}
      ORDER BY m.embedding <=> $1::vector
      LIMIT $6) AS n
ORDER BY n.distance, n.record_id, n.version DESC

-- name: text_versions
SELECT t.id, t.record_id, count(*) OVER () AS matches
FROM {{terms}} AS q,
     LATERAL (SELECT m.id, m.record_id, m.content_tsv, m.ingestion_time
              FROM memories m
              WHERE m.content_tsv @@ q AND {{versions}}
              LIMIT 201) AS t
ORDER BY ts_rank_cd(t.content_tsv, q) DESC, t.ingestion_time DESC, t.id
LIMIT $6

-- name: evidence
-- For the candidate versions $2 that the caller may read ($3): the cosine distance of the query
-- embedding the search orders by ($1) and of the model's own ($5) (NULL for a version without
-- an embedding), its type, the query's words ($4, stemmed as the content is) and those of them
-- each version holds (one tsquery per word, matched against the stored tsvector: cheaper than
-- intersecting arrays).
SELECT m.id, m.embedding <=> $1::vector AS distance, m.embedding <=> $5::vector AS raw_distance,
       m.type, q.words,
       ARRAY(SELECT w.word FROM unnest(q.words, q.queries) AS w(word, query)
             WHERE m.content_tsv @@ w.query) AS matched
FROM (SELECT s.words, ARRAY(SELECT quote_literal(x)::tsquery FROM unnest(s.words) AS x) AS queries
      FROM (SELECT tsvector_to_array(to_tsvector('english', regexp_replace($4, '(\S{255})', '\1 ', 'g'))) AS words) AS s) AS q,
     memories AS m
WHERE m.id = ANY($2::uuid[]) AND m.access_level = ANY($3::text[])
