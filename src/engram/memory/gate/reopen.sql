-- SQL of the undoing of resolutions whose grounds were raised, run by
-- engram.memory.gate.reopen (engram.memory_edges, engram.memories, engram.librarian_audit).

-- name: conflict_partners
-- The records that share a detected conflict's edge (a supersession or contradiction Layer 2
-- linked: its provenance names a classification) with a version of record $1, either way.
SELECT o.record_id
FROM memories x
JOIN memory_edges e ON e.source_id = x.id
JOIN memories o ON o.id = e.target_id
WHERE x.record_id = $1 AND o.record_id <> $1
  AND e.kind IN ('supersedes', 'contradicts') AND e.provenance ? 'classification'
UNION
SELECT n.record_id
FROM memories x
JOIN memory_edges e ON e.target_id = x.id
JOIN memories n ON n.id = e.source_id
WHERE x.record_id = $1 AND n.record_id <> $1
  AND e.kind IN ('supersedes', 'contradicts') AND e.provenance ? 'classification'

-- name: resolution_steps
-- The conflict resolver's approved steps on record $1 ($2 the resolver's agent id), oldest
-- first, each with the conflict edge it carried out. A step's request id is
-- resolve:<the conflicting write's decision>:<the older version>:<step>[@<revision>]; a step
-- carried out on a consolidated summary (':summary:' in its id) is not among them.
SELECT a.seq, a.decision_id, a.request_id, a.outcome, a.version_id,
       e.weight AS similarity, e.provenance->>'classification' AS classification,
       e.provenance->>'reason' AS reason,
       e.source_id AS newer_version, n.record_id AS newer_record,
       e.target_id AS older_version, o.record_id AS older_record
FROM librarian_audit a
JOIN memory_edges e
  ON e.target_id = split_part(a.request_id, ':', 3)::uuid
 AND e.decision_id = split_part(a.request_id, ':', 2)::uuid
 AND e.kind IN ('supersedes', 'contradicts')
JOIN memories n ON n.id = e.source_id
JOIN memories o ON o.id = e.target_id
WHERE a.record_id = $1 AND a.agent_id = $2 AND a.decision = 'approved'
  AND a.request_id LIKE 'resolve:%' AND a.request_id NOT LIKE '%:summary:%'
ORDER BY a.seq

-- name: escalated_in
-- Whether the write of version $1 linked a conflict with a version of record $2 as escalated
-- (its own Layer 2 found the conflict again and put it in front of a person).
SELECT EXISTS (
    SELECT 1 FROM memory_edges e
    JOIN memories t ON t.id = e.target_id
    WHERE e.source_id = $1 AND t.record_id = $2 AND e.provenance->>'resolution' = 'escalated'
)
