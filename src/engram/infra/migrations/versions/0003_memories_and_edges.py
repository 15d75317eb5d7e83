"""Version rows of memory records, and typed edges between them.

One row per version. All versions of a record share ``record_id``; ``UNIQUE (record_id,
version)`` makes the second of two racing writers fail, and a partial unique index allows
exactly one head (``superseded_by IS NULL``) per record, so a chain can never fork. Closing
the old head before inserting the new one needs the deferrable self-reference.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TYPES = (
    "'belief', 'decision', 'episode', 'skill', 'entity', 'preference', 'reflection', 'resource'"
)
_LEVELS = "'public', 'agent', 'user', 'system', 'sensitive'"
_EDGES = "'derived_from', 'supersedes', 'relates_to', 'contradicts', 'refines', 'similar_to'"


def upgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute(
        "CREATE TYPE engram.memory_status AS ENUM "
        "('active', 'superseded', 'consolidated', 'forgotten', 'challenged')"
    )
    op.execute(
        f"""
        CREATE TABLE engram.memories (
            id                 uuid PRIMARY KEY,
            record_id          uuid NOT NULL,
            version            integer NOT NULL,
            type               text NOT NULL,
            content            text NOT NULL,
            metadata           jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            superseded_by      uuid,
            source_agent       text NOT NULL,
            source_confidence  real NOT NULL,
            evidence_links     uuid[] NOT NULL DEFAULT '{{}}',
            event_time         timestamptz NOT NULL,
            event_time_end     timestamptz,
            ingestion_time     timestamptz NOT NULL DEFAULT now(),
            ingestion_time_end timestamptz,
            access_level       text NOT NULL DEFAULT 'agent',
            classification     text,
            gate_decision_id   uuid NOT NULL,
            gate_decision_type text NOT NULL,
            expected_version   integer,
            namespace          text NOT NULL DEFAULT 'default',
            status             engram.memory_status NOT NULL DEFAULT 'active',
            consolidation_path text NOT NULL DEFAULT 'fast',
            decay_score        real NOT NULL DEFAULT 1.0,
            importance         real NOT NULL DEFAULT 0.5,
            content_hash       bytea NOT NULL,
            repetitions        integer NOT NULL DEFAULT 1,
            last_reinforced_at timestamptz,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now(),
            embedding          vector(384),
            embedding_model    text,
            content_tsv        tsvector
                GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
            CONSTRAINT memories_record_version_key UNIQUE (record_id, version),
            CONSTRAINT memories_superseded_by_fkey FOREIGN KEY (superseded_by)
                REFERENCES engram.memories (id) DEFERRABLE INITIALLY DEFERRED,
            -- Deferred: the Gate appends the audit row last, to hold its lane lock briefly.
            CONSTRAINT memories_gate_decision_fkey FOREIGN KEY (gate_decision_id)
                REFERENCES engram.librarian_audit (decision_id) DEFERRABLE INITIALLY DEFERRED,
            CONSTRAINT memories_version_check CHECK (version >= 1),
            CONSTRAINT memories_type_check CHECK (type IN ({_TYPES})),
            CONSTRAINT memories_content_check CHECK (length(content) BETWEEN 1 AND 16000),
            CONSTRAINT memories_metadata_check CHECK (jsonb_typeof(metadata) = 'object'),
            CONSTRAINT memories_confidence_check CHECK (source_confidence BETWEEN 0 AND 1),
            CONSTRAINT memories_access_level_check CHECK (access_level IN ({_LEVELS})),
            CONSTRAINT memories_decision_type_check
                CHECK (gate_decision_type IN ('external', 'consolidation', 'self_healing')),
            CONSTRAINT memories_path_check CHECK (consolidation_path IN ('fast', 'slow')),
            CONSTRAINT memories_decay_check CHECK (decay_score BETWEEN 0 AND 1),
            CONSTRAINT memories_importance_check CHECK (importance BETWEEN 0 AND 1),
            CONSTRAINT memories_content_hash_check CHECK (length(content_hash) = 32),
            CONSTRAINT memories_repetitions_check CHECK (repetitions >= 1),
            CONSTRAINT memories_event_interval_check
                CHECK (event_time_end IS NULL OR event_time_end >= event_time),
            CONSTRAINT memories_ingestion_interval_check
                CHECK (ingestion_time_end IS NULL OR ingestion_time_end >= ingestion_time),
            CONSTRAINT memories_embedding_model_check
                CHECK ((embedding IS NULL) = (embedding_model IS NULL))
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX memories_one_head_idx ON engram.memories (record_id) "
        "WHERE superseded_by IS NULL"
    )
    op.execute(
        "CREATE INDEX memories_embedding_hnsw_idx ON engram.memories "
        "USING hnsw (embedding vector_cosine_ops)"
    )
    op.execute("CREATE INDEX memories_content_tsv_idx ON engram.memories USING gin (content_tsv)")
    op.execute(
        "CREATE INDEX memories_ingestion_range_idx ON engram.memories "
        "USING gist (tstzrange(ingestion_time, ingestion_time_end))"
    )
    op.execute(
        "CREATE INDEX memories_event_range_idx ON engram.memories "
        "USING gist (tstzrange(event_time, event_time_end))"
    )
    # Every version of a type by ingestion time: as-of listings scan it back from T.
    op.execute(
        "CREATE INDEX memories_listing_idx ON engram.memories "
        "(namespace, type, ingestion_time DESC)"
    )
    op.execute(
        "CREATE INDEX memories_head_hash_idx ON engram.memories (namespace, type, content_hash) "
        "WHERE superseded_by IS NULL"
    )
    op.execute(
        "CREATE INDEX memories_unembedded_idx ON engram.memories (ingestion_time) "
        "WHERE embedding IS NULL AND superseded_by IS NULL"
    )
    op.execute(
        f"""
        CREATE TABLE engram.memory_edges (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            source_id   uuid NOT NULL REFERENCES engram.memories (id),
            target_id   uuid NOT NULL REFERENCES engram.memories (id),
            kind        text NOT NULL,
            weight      real NOT NULL DEFAULT 1.0,
            provenance  jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            decision_id uuid REFERENCES engram.librarian_audit (decision_id)
                DEFERRABLE INITIALLY DEFERRED,
            created_at  timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT memory_edges_kind_check CHECK (kind IN ({_EDGES})),
            CONSTRAINT memory_edges_weight_check CHECK (weight BETWEEN 0 AND 1),
            CONSTRAINT memory_edges_no_loop_check CHECK (source_id <> target_id),
            CONSTRAINT memory_edges_unique_key UNIQUE (source_id, target_id, kind)
        )
        """
    )
    op.execute("CREATE INDEX memory_edges_target_idx ON engram.memory_edges (target_id, kind)")
    op.execute("REVOKE ALL ON engram.memories, engram.memory_edges FROM PUBLIC")
    op.execute("GRANT SELECT, INSERT ON engram.memories TO engram_runtime")
    # Content, provenance and event times of a version are immutable; only the columns that
    # close, re-mark or re-embed a version may change.
    op.execute(
        "GRANT UPDATE (superseded_by, event_time_end, ingestion_time_end, status, access_level, "
        "decay_score, updated_at, embedding, embedding_model, repetitions, last_reinforced_at) "
        "ON engram.memories TO engram_runtime"
    )
    op.execute("GRANT SELECT, INSERT ON engram.memory_edges TO engram_runtime")
    op.execute("GRANT USAGE ON TYPE engram.memory_status TO engram_runtime")
    op.execute("RESET ROLE")


def downgrade() -> None:
    op.execute("SET ROLE engram_owner")
    op.execute("DROP TABLE engram.memory_edges")
    op.execute("DROP TABLE engram.memories")
    op.execute("DROP TYPE engram.memory_status")
    op.execute("RESET ROLE")
