-- SQL of the Gate's one-statement writes (engram.memory.gate.at_once): a new record's
-- version row, or a record's next version with its head closed, then the version's edges,
-- its outbox events and its audit row, in one round trip and one implicit transaction. Each
-- part is the statement its owner runs on the transactional path: store's close_head,
-- insert_version and insert_edges, the outbox's insert_event, audit's append_entry. The
-- primary query reads the version CTE first, so the version (and its HNSW entry) is inserted
-- before the audit lane is locked, as on the transactional path; the lane is then held for
-- the audit row, the edges, the events and the commit.

-- fragment: isoformat_utc
-- v.ingestion_time as Python's datetime.isoformat() writes it in UTC: microseconds only when
-- they are not zero (tests/integration/test_at_once.py compares the two).
to_char(v.ingestion_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
|| CASE WHEN extract(microseconds FROM v.ingestion_time) % 1000000 = 0 THEN ''
        ELSE to_char(v.ingestion_time AT TIME ZONE 'UTC', '.US') END
|| '+00:00'

-- fragment: recorded
-- What both statements write after the version CTE: its edges, its events, its audit row,
-- and the row they answer with. With no version (an update whose head moved on) nothing is
-- written, no audit number is taken and the lane is not locked.
edges AS (
    INSERT INTO memory_edges (source_id, target_id, kind, weight, provenance, decision_id)
    SELECT v.id, e.target, e.kind, e.weight, e.provenance::jsonb, $14
    FROM version AS v,
         unnest($26::uuid[], $27::text[], $28::float8[], $29::text[])
             AS e(target, kind, weight, provenance)
    WHERE e.target <> v.id
    ON CONFLICT (source_id, target_id, kind) DO NOTHING
), events AS (
    INSERT INTO outbox (event_type, aggregate_id, payload, decision_id, dispatched_at, attempts)
    SELECT e.name, v.record_id, e.payload::jsonb, $14,
           CASE WHEN $47::text IS NOT NULL THEN now() END,
           CASE WHEN $47::text IS NOT NULL THEN 1 ELSE 0 END
    FROM version AS v, unnest($30::text[], $31::text[]) WITH ORDINALITY AS e(name, payload, n)
    ORDER BY e.n
    RETURNING id, event_type, aggregate_id
), announced AS (
    -- With a channel ($47), the events are announced here, as the outbox's delivery would
    -- announce them (its notice: id, event, aggregate_id), and sent only if this commits.
    SELECT pg_notify($47, jsonb_build_object(
               'id', o.id, 'event', o.event_type, 'aggregate_id', o.aggregate_id)::text)
    FROM (SELECT id, event_type, aggregate_id FROM events WHERE $47::text IS NOT NULL
          ORDER BY id OFFSET 0) AS o
), stamped AS (
    SELECT v.ingestion_time, {{isoformat_utc}} AS occurred
    FROM version AS v
), head AS (
    SELECT lane, last_hash FROM audit_chain_heads
    WHERE lane = $44 AND EXISTS (SELECT 1 FROM version)
    FOR UPDATE
), numbered AS (
    SELECT lane, last_hash, nextval('librarian_audit_seq_seq') AS seq FROM head
), entry AS (
    INSERT INTO librarian_audit (
        seq, decision_id, request_id, occurred_at, action, decision, outcome, decision_type,
        reason, agent_id, caller, record_id, version_id, input_snapshot, layer1_checks,
        layer2_decision, decision_source, duration_ms, lane, prev_hash, row_hash, hash_version
    )
    OVERRIDING SYSTEM VALUE
    SELECT n.seq, $14, $32, s.ingestion_time, $33, $34, $35, $15, $36, $37, $38::json, $2, $1,
           $39::json, $40::json, $41::json, $42, $43, n.lane, n.last_hash,
           sha256(
               n.last_hash || int8send(n.seq) || $45::bytea
               || int8send(octet_length(s.occurred)::int8) || convert_to(s.occurred, 'UTF8')
               || $46::bytea
           ),
           2
    FROM numbered AS n, stamped AS s
    RETURNING seq, lane, row_hash
), moved AS (
    UPDATE audit_chain_heads AS h
    SET last_seq = entry.seq, last_hash = entry.row_hash
    FROM entry
    WHERE h.lane = entry.lane
    RETURNING entry.seq
)
-- A lane head that did not move would fork the chain: the division fails the statement.
SELECT v.*, (SELECT seq FROM moved) AS audit_seq,
       1 / (SELECT count(*) FROM moved)::int AS lane_moved,
       (SELECT count(*) FROM announced) AS announced
FROM version AS v

-- name: create_at_once
-- $1-$25 as store's insert_version (its insert_version_row fragment). Edges from the new
-- version: $26 targets, $27 kinds, $28 weights, $29 provenance (JSON text). Outbox events
-- of the record ($2): $30 names, $31 payloads (JSON text). The audit row: $32 request id,
-- $33 action, $34 decision, $35 outcome, $36 reason, $37 agent, $38 caller, $39 input,
-- $40 checks, $41 advice, $42 decision source, $43 duration, $44 lane; $47 the NOTIFY channel
-- on which the events are announced and written delivered (NULL: left to the outbox's
-- delivery: engram.infra.events.EventBus.announcing_channel). The audit row's hash covers
-- $45 || the occurred_at field || $46, where $45 and $46 are AuditEntry.payload's fields
-- before and after occurred_at and the middle one is the version's ingestion time written
-- as Python's isoformat() writes it (with microseconds unless they are zero),
-- length-prefixed.
WITH version AS (
    {{insert_version_row}}
    RETURNING {{record_columns}}
), {{recorded}}

-- name: update_at_once
-- $1-$47 as create_at_once, the version being the next of the head $48 (its ingestion time
-- passed as $11, the earliest the new version may start). The head is closed only while it
-- is still the record's live head at the access level $49 the Gate planned against (what
-- store's head_for_update and the write path's checks ask); otherwise nothing is written and
-- no row comes back. Closing it waits for another writer's lock on it, as head_for_update
-- does, and then reads the row that writer left. The version is inserted from the closed
-- row, which orders the two: the record never has two heads.
WITH closed AS (
    UPDATE memories
    SET superseded_by = $1,
        ingestion_time_end = greatest(now(), ingestion_time),
        status = 'superseded',
        updated_at = now()
    WHERE id = $48 AND superseded_by IS NULL AND status <> 'forgotten' AND access_level = $49
    RETURNING id
), version AS (
    {{insert_version_row}}
    FROM closed
    RETURNING {{record_columns}}
), {{recorded}}
