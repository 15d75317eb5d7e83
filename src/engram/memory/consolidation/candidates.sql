-- SQL of the consolidation planner (engram.memory.consolidation.candidates): the fast-path
-- records a pass reads. Every write to a memory goes through the Gate, never through here.

-- name: candidates
-- Active fast-path heads of the types $1 at the access level $4 (NULL: every level),
-- ingested at or after $2 (NULL: any time), oldest first, at most $3, each with the agent the audit log says wrote that version (not the
-- source_agent it claims). Records without an embedding (degraded writes) are counted apart.
SELECT {{record_columns}}, embedding,
       (SELECT a.agent_id FROM librarian_audit a WHERE a.decision_id = memories.gate_decision_id)
           AS writer
FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
  AND type = ANY($1::text[]) AND embedding IS NOT NULL
  AND ($2::timestamptz IS NULL OR ingestion_time >= $2)
  AND ($4::text IS NULL OR access_level = $4)
ORDER BY ingestion_time, id
LIMIT $3

-- name: unembedded_candidates
SELECT count(*) FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
  AND type = ANY($1::text[]) AND embedding IS NULL
  AND ($2::timestamptz IS NULL OR ingestion_time >= $2)
  AND ($3::text IS NULL OR access_level = $3)

-- name: relates_to_edges
-- relates_to edges between versions of $1, in either direction.
SELECT source_id, target_id FROM memory_edges
WHERE kind = 'relates_to' AND source_id = ANY($1::uuid[]) AND target_id = ANY($1::uuid[])
