"""Bulk seeding of version chains straight into the tables (for benchmarks and plan tests).

This bypasses the Gate on purpose: it builds the *shape* of a large store quickly (lineages
with several versions, closed ingestion intervals, eight types, two namespaces) so that read
paths can be measured and their plans checked. Foreign keys to the audit log are not checked
while seeding (``session_replication_role = replica``; superuser only), and the rows carry no
embedding unless ``with_vectors``.
"""

from __future__ import annotations

from typing import Any

TYPES = ["belief", "decision", "episode", "skill", "entity", "preference", "reflection", "resource"]

_SEED = """
INSERT INTO engram.memories (
    id, record_id, version, type, content, metadata, superseded_by, source_agent,
    source_confidence, event_time, ingestion_time, ingestion_time_end, access_level,
    gate_decision_id, gate_decision_type, namespace, status, importance, content_hash,
    embedding, embedding_model
)
SELECT
    md5(r || ':' || v)::uuid,
    md5(r || ':1')::uuid,
    v,
    ($3::text[])[1 + r % array_length($3::text[], 1)],
    'Record ' || r || ' version ' || v || ' says the value of setting ' || (r % 97)
        || ' is ' || (r * 31 + v) || ' units.',
    CASE ($3::text[])[1 + r % array_length($3::text[], 1)]
        WHEN 'decision' THEN '{"rationale": "seeded"}'
        WHEN 'skill' THEN '{"steps": ["one", "two"]}'
        WHEN 'entity' THEN '{"name": "thing", "kind": "service"}'
        WHEN 'preference' THEN '{"subject": "things"}'
        WHEN 'resource' THEN '{"locator": "https://example.org/doc"}'
        ELSE '{}' END::jsonb,
    CASE WHEN v < $1 THEN md5(r || ':' || (v + 1))::uuid END,
    'seed',
    0.75,
    timestamptz '2025-01-01' + make_interval(days => (r % 300) + v * 7),
    timestamptz '2025-01-01' + make_interval(secs => (r * $1 + v) * 10),
    CASE WHEN v < $1 THEN timestamptz '2025-01-01' + make_interval(secs => (r * $1 + v + 1) * 10)
    END,
    (ARRAY['agent', 'agent', 'agent', 'user', 'public'])[1 + r % 5],
    md5(r || ':' || v || ':d')::uuid,
    'external',
    CASE WHEN r % 10 = 0 THEN 'other' ELSE 'default' END,
    CASE WHEN v < $1 THEN 'superseded' ELSE 'active' END::engram.memory_status,
    0.5,
    sha256(convert_to(r || ':' || v, 'UTF8')),
    CASE WHEN $2 THEN (SELECT array_agg(random() - 0.5)::vector(384)
                       FROM generate_series(1, 384) WHERE r IS NOT NULL) END,
    CASE WHEN $2 THEN 'seed-random' END
FROM generate_series($4::int, $5::int) AS r, generate_series(1, $1) AS v
"""


async def seed_versions(
    conn: Any,
    *,
    records: int,
    versions_per_record: int,
    with_vectors: bool = False,
    types: list[str] | None = None,
    first: int = 1,
    chunk: int = 20_000,
) -> None:
    """Insert ``records`` lineages of ``versions_per_record`` versions each, then ANALYZE.

    ``conn`` is an asyncpg connection of a superuser (to skip foreign-key checks).
    """
    await conn.execute("SET session_replication_role = replica")
    # Building the vector and text indexes once at the end is far faster than row by row.
    await conn.execute("DROP INDEX engram.memories_embedding_hnsw_idx")
    await conn.execute("DROP INDEX engram.memories_content_tsv_idx")
    try:
        last = first + records - 1
        for start in range(first, last + 1, chunk):
            end = min(last, start + chunk - 1)
            await conn.execute(_SEED, versions_per_record, with_vectors, types or TYPES, start, end)
    finally:
        await conn.execute("SET session_replication_role = DEFAULT")
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute(
            "CREATE INDEX memories_embedding_hnsw_idx ON engram.memories "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        await conn.execute(
            "CREATE INDEX memories_content_tsv_idx ON engram.memories USING gin (content_tsv)"
        )
    await conn.execute("ANALYZE engram.memories")
