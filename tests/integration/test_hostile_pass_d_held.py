"""Hostile pass D: what was checked and held (kept as regression tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP
from tests.integration.test_hostile_pass_b import LAST_INSTANT
from tests.integration.test_hostile_pass_d import _forget, _seed_marked_incident
from tests.integration.test_http_api import Api
from tests.integration.test_self_healing import rescan

api = http_api.api


async def test_replay_and_state_hold_over_todays_decision_shapes(api: Api) -> None:
    """A log with an evidence rejection "above this record's access level", a reserved-instant
    rejection, REVEAL rows from REST, a release, a consolidation pass, a PII rescan raising a
    consumed source and its summary, and the release an agent's forget starts: replay with
    the default policy changes no decision, raises nothing, and the state rebuilt from the
    log is the store's."""
    kernel = api.kernel
    hidden = await api.write(
        {
            "type": "belief",
            "content": "The user-level runbook lives in vault B.",
            "access_level": "user",
        },
        api.admin,
    )
    assert 201 == hidden.status_code, hidden.text
    above = await api.write(
        {
            "type": "belief",
            "content": "Runbooks are kept in the vaults.",
            "access_level": "agent",
            "evidence_links": [hidden.json()["record_id"]],
        },
        api.admin,
    )
    assert 422 == above.status_code, above.text
    assert "above" in above.text
    edge = await api.write(
        {"type": "episode", "content": "The vault flooded.", "event_time": LAST_INSTANT},
        api.admin,
    )
    assert 422 == edge.status_code, edge.text
    assert "reserved" in edge.text
    quarantined = await api.write(
        {"type": "belief", "content": "Dana's private address is dana.r@example.org."}, api.admin
    )
    assert quarantined.status_code in (201, 202), quarantined.text
    for path in ("/v1/quarantine", "/v1/audit"):
        shown = await api.client.get(
            path, params={"reveal": "true", "reason": "triage"}, headers=api.admin
        )
        assert 200 == shown.status_code, shown.text
    released = await api.client.post(
        f"/v1/quarantine/{quarantined.json()['record_id']}/release",
        json={"reason": "a shared team address", "level": "agent"},
        headers=api.admin,
    )
    assert 200 == released.status_code, released.text
    ids, _ = await _seed_marked_incident(kernel)
    await kernel.consolidation.run(DEEP)
    assert (await rescan(kernel).run()).flagged == 1
    await _forget(kernel, ids[2])
    await kernel.events.settled()

    report = await kernel.replay.replay()
    assert [] == [d.to_json() for d in report.changed]
    assert {"REVEAL", "RELEASE"} <= {d.action for d in report.skipped}
    state = await kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [d.to_json() for d in state.differences]
    assert (await kernel.audit.verify()).ok
