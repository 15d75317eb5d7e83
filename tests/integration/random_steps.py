"""What each step of a randomised differential run does (see ``random_twins``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import httpx
from mcp.types import CallToolResult, TextContent

from engram.errors import EngramError
from engram.memory.types import AccessLevel, CallerIdentity, MemoryType, WriteOutcome
from engram.protocols.inprocess import SearchInput
from engram.protocols.views import feedback_view, record_view, result_view, search_view
from tests.integration.consolidation_helpers import DEEP
from tests.integration.random_twins import (
    HIDERS,
    PII,
    QUERIES,
    RELEASED,
    TOPICS,
    VIAS,
    Twin,
    series,
)

ADMIN = CallerIdentity.system("pass-m")


async def run(twin: Twin, sequence: list[dict[str, Any]]) -> list[Any]:
    """Run ``sequence`` on ``twin`` (its hidden steps only in store B); the transcript."""
    for step in sequence:
        if step.get("hidden"):
            if twin.hidden:
                await hidden_step(twin, step)
        else:
            twin.transcript.append({"step": step["kind"], "answers": await caller_step(twin, step)})
        await twin.store.kernel.events.settled()
        twin.marks.append(datetime.now(UTC))
    return twin.transcript


def _rest(response: httpx.Response) -> list[Any]:
    return [response.status_code, response.headers.get("etag"), response.json()]


def _tool(result: CallToolResult) -> list[Any]:
    """A tool's answer: whether it is an error, its structured content and its text."""
    return [result.is_error, result.structured_content, _text(result)]


def _text(result: CallToolResult) -> list[Any]:
    """The text parts: the sentence as it is; the JSON only as whether it says what the
    structured content says (its records' order is compared there)."""
    texts = [part.text for part in result.content if isinstance(part, TextContent)]
    return [_same_json(text, result.structured_content) for text in texts]


def _same_json(text: str, body: Any) -> Any:
    try:
        return {"json_matches": json.loads(text) == json.loads(json.dumps(body, default=str))}
    except ValueError:
        return text


def _headers(twin: Twin, key: str | None) -> dict[str, str]:
    headers = twin.store.headers[twin.caller]
    return headers if key is None else {**headers, "Idempotency-Key": key}


def _keyed(arguments: dict[str, Any], key: str | None) -> dict[str, Any]:
    return arguments if key is None else {**arguments, "request_id": key}


def _id(value: Any) -> UUID | None:
    try:
        return UUID(str(value)) if value is not None else None
    except ValueError:
        return None


async def caller_step(twin: Twin, step: dict[str, Any]) -> list[Any]:  # noqa: PLR0911
    """The caller's answers to one step."""
    kind = step["kind"]
    if kind == "remember":
        return await _remember(twin, step)
    if kind == "consolidate":
        await twin.store.kernel.consolidation.run(DEEP)  # its report counts hidden records
        return []
    if kind == "probe":
        return await _probe(twin, step)
    if kind == "series":
        out = []
        for body in series(step["series"]):
            out += await _remember(twin, {"body": body, "via": step["via"]})
        return out
    if kind == "sweep":
        return await _sweep(twin, step)
    if kind in ("list", "search"):
        return await (_list(twin, step) if kind == "list" else _search(twin, step))
    record_id = twin.slot(step["slot"])
    if record_id is None:
        return ["no record"]
    if kind == "update":
        return await _update(twin, step, record_id)
    if kind == "forget":
        return await _forget(twin, step, record_id)
    if kind == "get":
        return await _get(twin, step, record_id)
    if kind == "history":
        return await _history(twin, record_id)
    return await _feedback(twin, step, record_id)


async def _remember(twin: Twin, step: dict[str, Any]) -> list[Any]:
    body = {k: v for k, v in step["body"].items() if v is not None}
    if (cited := twin.slot(step.get("cite"))) is not None:
        body["evidence_links"] = [str(cited)]
    store, via, key = twin.store, step["via"], step.get("key")
    if via == "session":
        result = await twin.session().remember(body, request_id=key)
        twin.slots.append(result.record_id)
        return [result_view(result)]
    if via == "rest":
        response = await store.client.post("/v1/memories", json=body, headers=_headers(twin, key))
        twin.slots.append(_id(response.json().get("record_id")))
        return _rest(response)
    tool = await store.tools.call("remember", _keyed(body, key), twin.principal)
    twin.slots.append(_id((tool.structured_content or {}).get("record_id")))
    return _tool(tool)


async def _version(twin: Twin, record_id: UUID) -> int:
    head = await twin.store.kernel.temporal.current(
        record_id, caller=twin.principal.caller, count_read=False
    )
    return 1 if head is None else head.version


async def _update(twin: Twin, step: dict[str, Any], record_id: UUID) -> list[Any]:
    changes = dict(step["body"])
    version = await _version(twin, record_id)
    store, via, key = twin.store, step["via"], step.get("key")
    if via == "session":
        result = await twin.session().amend(
            record_id, changes, expected_version=version, request_id=key
        )
        return [version, result_view(result)]
    if via == "rest":
        headers = {**_headers(twin, key), "If-Match": f'"{version}"'}
        response = await store.client.patch(
            f"/v1/memories/{record_id}", json=changes, headers=headers
        )
        return [version, _rest(response)]
    arguments = {"record_id": str(record_id), "expected_version": version, **changes}
    tool = await store.tools.call("update", _keyed(arguments, key), twin.principal)
    return [version, *_tool(tool)]


async def _forget(twin: Twin, step: dict[str, Any], record_id: UUID) -> list[Any]:
    store, via, key = twin.store, step["via"], step.get("key")
    if via == "session":
        return [result_view(await twin.session().forget(record_id, request_id=key))]
    if via == "rest":
        headers = _headers(twin, key)
        return _rest(await store.client.delete(f"/v1/memories/{record_id}", headers=headers))
    arguments = _keyed({"record_id": str(record_id)}, key)
    tool = await store.tools.call("forget", arguments, twin.principal)
    return _tool(tool)


def _as_of(twin: Twin, step: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if step.get("as_of") is not None:
        found["as_of_ingestion"] = twin.marks[step["as_of"]].isoformat()
    if step.get("as_of_event") is not None:
        found["as_of_event"] = step["as_of_event"]
    return found


async def _get(twin: Twin, step: dict[str, Any], record_id: UUID) -> list[Any]:
    store, caller = twin.store, twin.principal.caller
    instants = _as_of(twin, step)
    found = await store.kernel.temporal.query(
        record_id=record_id,
        as_of_ingestion=_instant(instants.get("as_of_ingestion")),
        as_of_event=_instant(instants.get("as_of_event")),
        caller=caller,
    )
    response = await store.client.get(
        f"/v1/memories/{record_id}", params=instants, headers=store.headers[twin.caller]
    )
    arguments = {"record_id": str(record_id), **instants}
    tool = await store.tools.call("get", arguments, twin.principal)
    arguments["include_forgotten"] = True
    forgotten = await store.tools.call("get", arguments, twin.principal)
    current = await store.kernel.temporal.current(record_id, caller=caller)
    return [
        [record_view(r) for r in found],
        _rest(response),
        _tool(tool),
        _tool(forgotten),
        None if current is None else record_view(current),
    ]


def _instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


async def _history(twin: Twin, record_id: UUID) -> list[Any]:
    store = twin.store
    chain = await store.kernel.temporal.get_version_chain(record_id, caller=twin.principal.caller)
    response = await store.client.get(
        f"/v1/memories/{record_id}/versions", headers=store.headers[twin.caller]
    )
    tool = await store.tools.call("history", {"record_id": str(record_id)}, twin.principal)
    return [[record_view(r) for r in chain], _rest(response), *_tool(tool)]


async def _list(twin: Twin, step: dict[str, Any]) -> list[Any]:
    store, args = twin.store, step["args"]
    kwargs = {**args, "types": [MemoryType(t) for t in args["types"]]} if "types" in args else args
    page = await store.kernel.temporal.page(caller=twin.principal.caller, **kwargs)
    everything = await store.kernel.temporal.page(
        caller=twin.principal.caller, **{**kwargs, "limit": 100}
    )
    if _cut_inside_a_tie([r.ingestion_time for r in everything], len(page)):
        return ["a page ends inside records of one instant (ordered by their random ids)"]
    out: list[Any] = [_by_instant([record_view(r) for r in page])]
    tool = await store.tools.call("list", args, twin.principal)
    out += [tool.is_error, _listed(tool.structured_content), _text(tool)]
    cursor = (tool.structured_content or {}).get("next_cursor")
    if cursor:
        more = await store.tools.call("list", {**args, "cursor": cursor}, twin.principal)
        out += [_listed(more.structured_content), _text(more)]
    instants = _as_of(twin, step)
    if instants and "tags" not in kwargs:  # a listing as of an instant (in process only)
        found = await store.kernel.temporal.query(
            as_of_ingestion=_instant(instants.get("as_of_ingestion")),
            as_of_event=_instant(instants.get("as_of_event")),
            caller=twin.principal.caller,
            **kwargs,
        )
        out.append(_by_instant([record_view(r) for r in found]))
    return out


def _cut_inside_a_tie(values: list[Any], size: int) -> bool:
    """Whether the first ``size`` of ``values`` end inside a run of equal values."""
    return 0 < size < len(values) and values[size - 1] == values[size]


def _by_instant(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A listing newest first, records of one instant (a consolidation batch's summaries)
    by content: the listing orders those by their random ids."""
    return sorted(records, key=lambda r: (_negated(r["ingestion_time"]), r["content"]))


def _negated(instant: str) -> float:
    return -datetime.fromisoformat(instant).timestamp()


def _listed(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """A page of ``list`` in :func:`_by_instant` order; its cursor names the last record,
    which among records of one instant is the one with the lowest id (shown as tied)."""
    if body is None or "records" not in body:
        return body
    records = body["records"]
    instants = [r["ingestion_time"] for r in records]
    listed = {**body, "records": _by_instant(records)}
    if body.get("next_cursor") is not None and instants and instants.count(instants[-1]) > 1:
        del listed["next_cursor"]
        listed["cursor_names_one_of_records_of_one_instant"] = True
    return listed


async def _search(twin: Twin, step: dict[str, Any]) -> list[Any]:
    store = twin.store
    body = {"query": step["query"], **step["args"], **_as_of(twin, step)}
    found = await SearchInput.model_validate(body).run(store.kernel, twin.principal.caller)
    wider = {**body, "limit": 100}
    more = await SearchInput.model_validate(wider).run(store.kernel, twin.principal.caller)
    if _cut_inside_a_tie([hit.similarity for hit in more.hits], len(found.hits)):
        return ["the limit falls inside hits of one score (ordered by their random ids)"]
    response = await store.client.post("/v1/search", json=body, headers=store.headers[twin.caller])
    tool = await store.tools.call("recall", body, twin.principal)
    return [search_view(found), _rest(response), *_tool(tool)]


async def _probe(twin: Twin, step: dict[str, Any]) -> list[Any]:
    """The caller names an id that is a hidden record (or version) in store B and nothing
    in store A: every answer must be that of an unknown id."""
    pool = twin.hidden_versions if step["what"] == "version" else twin.hidden_ids
    if twin.hidden:
        target = pool[step["pick"] % len(pool)] if pool else uuid4()
        numbers = {named: number for number, named in twin.standins.items()}
        twin.probes[step["n"]] = numbers.get(target, len(numbers))
        twin.standins[twin.probes[step["n"]]] = target
    else:
        target = twin.standins.setdefault(twin.probes[step["n"]], uuid4())
    what = step["what"]
    if what in ("get", "version"):
        return await _get(twin, {}, target) + await _history(twin, target)
    if what == "history":
        return await _history(twin, target)
    if what in ("feedback", "update", "forget"):
        out = []
        for via in VIAS:
            sub = {"via": via, "useful": True, "body": {"content": step["body"]["content"]}}
            if what == "feedback":
                out.append(await _feedback(twin, sub, target))
            elif what == "update":
                out.append(await _update(twin, sub, target))
            else:
                out.append(await _forget(twin, sub, target))
        return out
    body = {**step["body"], "evidence_links": [str(target)]}
    return [result_view(await twin.session().remember(body))]


async def _sweep(twin: Twin, step: dict[str, Any]) -> list[Any]:
    """Everything at the end: each record's history and head, every query without a floor
    (old versions too), and the listings of both namespaces."""
    out: list[Any] = []
    for slot in range(step["slots"]):
        record_id = twin.slot(slot)
        if record_id is not None:
            out.append(await _history(twin, record_id))
            out.append(await _get(twin, {}, record_id))
    floors = ({"min_score": 0.0, "limit": 20}, {"include_superseded": True, "limit": 20})
    out += [await _search(twin, {"query": q, "args": a}) for q in QUERIES for a in floors]
    listed = [{"args": {"namespace": namespace, "limit": 100}} for namespace in ("default", "ops")]
    return out + [await _list(twin, step) for step in listed]


async def _feedback(twin: Twin, step: dict[str, Any], record_id: UUID) -> list[Any]:
    store, via, useful = twin.store, step["via"], step["useful"]
    if via == "session":
        try:
            receipt = await store.kernel.retrieval.feedback(
                twin.principal.caller, record_id, useful=useful
            )
        except EngramError as exc:
            return [type(exc).__name__, str(exc)]
        return [feedback_view(receipt)]
    body = {"record_id": str(record_id), "useful": useful}
    if via == "rest":
        headers = store.headers[twin.caller]
        return _rest(await store.client.post("/v1/feedback", json=body, headers=headers))
    tool = await store.tools.call("feedback", body, twin.principal)
    return _tool(tool)


async def hidden_step(twin: Twin, step: dict[str, Any]) -> None:  # noqa: PLR0912
    """A step of the higher-tier agent that the caller may not see (store B only)."""
    name, level = HIDERS[twin.caller][step["hider"]]
    session = twin.session(name)
    kind, body = step["kind"], dict(step["body"])
    target = twin.slot(step["slot"])
    if kind == "dup" and target is not None:
        head = await twin.store.kernel.temporal.current(target, count_read=False)
        if head is None:
            return
        body = {
            "type": head.type.value,
            "content": head.content,
            "namespace": head.namespace,
            "metadata": head.metadata,
        }
        if head.event_time is not None and head.type.value == "episode":
            body["event_time"] = head.event_time.isoformat()
    if kind == "cite" and target is not None:
        body["evidence_links"] = [str(target)]
    if kind in ("forget", "update"):
        if not twin.hidden_ids:
            return
        hidden = twin.hidden_ids[step["pick"] % len(twin.hidden_ids)]
        boss = twin.session("boss")
        if kind == "forget":
            await boss.forget(hidden)
            return
        head = await twin.store.kernel.temporal.current(hidden, count_read=False)
        if head is not None:
            changes = {"content": body["content"], "metadata": body.get("metadata", {})}
            changes["namespace"] = body.get("namespace", "default")
            if step["pick"] % 3 == 0:  # another level, still hidden from the caller
                changes["access_level"] = HIDERS[twin.caller][step["pick"] % 2][1]
            if head.event_time is not None and head.type.value == "episode":
                changes["event_time"] = head.event_time.isoformat()
            await boss.amend(hidden, changes, expected_version=head.version)
        return
    if kind == "series":
        for episode in series(step["series"]):
            for variant in (episode["content"], episode["content"] + " Confirmed."):
                body = {**episode, "content": variant, "access_level": level}
                created = await session.remember(body)
                if created.outcome is WriteOutcome.CREATED and created.record_id is not None:
                    twin.hidden_ids.append(created.record_id)
        return
    if kind == "release":  # quarantined (PII), then released to a level still hidden
        body["content"] = f"{PII} {body['content']}"
        held = await twin.session("boss").remember({**body, "access_level": "agent"})
        if held.outcome is WriteOutcome.CREATED and held.record_id is not None:
            levels = RELEASED[twin.caller]
            level = levels[step["pick"] % len(levels)]
            await twin.store.kernel.quarantine.release(
                held.record_id, admin=ADMIN, reason="reviewed", level=AccessLevel(level)
            )
            twin.hidden_ids.append(held.record_id)
        return
    if kind == "raise":
        topic = TOPICS[step["pick"] % len(TOPICS)]
        body["content"] = f"{topic[3]} Ticket {step['pick']}."
        result = await session.remember({**body, "access_level": "agent"})
        if result.outcome is WriteOutcome.CREATED and result.record_id is not None:
            changes = {"access_level": level}
            if "event_time" in body:
                changes["event_time"] = body["event_time"]
            raised = await session.amend(result.record_id, changes, expected_version=result.version)
            assert raised.outcome is WriteOutcome.UPDATED, raised.reason
            twin.hidden_ids.append(result.record_id)
            if result.modified_record is not None:
                twin.hidden_versions.append(result.modified_record.id)
        return
    result = await session.remember({**body, "access_level": level})
    if result.outcome is WriteOutcome.CREATED and result.record_id is not None:
        twin.hidden_ids.append(result.record_id)
        if result.modified_record is not None:
            twin.hidden_versions.append(result.modified_record.id)
