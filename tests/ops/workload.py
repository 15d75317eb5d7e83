"""A small workload over the REST API that touches every kind of outcome the metrics count."""

from __future__ import annotations

from collections import Counter

import httpx

from tests.ops.stack import Stack

FACTS = [
    "The ledger service stores its data in PostgreSQL 16.",
    "The fraud scorer is deployed on Kubernetes in the eu-west cluster.",
    "Release notes are published every Thursday afternoon.",
    "The billing team owns the invoice renderer.",
    "Nightly backups of the ledger database are kept for thirty days.",
    "The search index is rebuilt after every schema migration.",
]
SEARCHES = [
    "which database does the ledger service use",
    "where does the fraud scorer run",
    "when are release notes published",
    "who owns the invoice renderer",
    "how long are backups kept",
]


def _expect(answer: httpx.Response, *statuses: int) -> httpx.Response:
    if answer.status_code not in statuses:
        raise AssertionError(f"{answer.request.method} {answer.request.url}: {answer.text}")
    return answer


def drive(stack: Stack) -> Counter[int]:
    """Writes, searches, an update with a stale version, a PII quarantine, a rejection, a
    contradiction and a rate-limited burst; the statuses answered, counted."""
    statuses: Counter[int] = Counter()
    base = stack.engram.base
    with (
        httpx.Client(base_url=base, headers=_auth(stack.token), timeout=30) as agent,
        httpx.Client(base_url=base, headers=_auth(stack.limited_token), timeout=30) as limited,
    ):

        def write(client: httpx.Client, content: str, *expected: int, **extra: object) -> str:
            body = {"type": "belief", "content": content, **extra}
            answer = _expect(client.post("/v1/memories", json=body), *expected)
            statuses[answer.status_code] += 1
            return str(answer.headers.get("location", ""))

        locations = [write(agent, fact, 201) for fact in FACTS]
        write(agent, "The on-call contact for the ledger is dana.ops@example.com.", 201)  # PII
        write(agent, "Which database does the ledger service use?", 422)  # not a statement
        write(agent, "The public API authenticates requests with JWT bearer tokens.", 201)
        write(agent, "The public API authenticates requests with session cookies.", 200, 201)

        change = {"content": "The fraud scorer moved from Kubernetes to Nomad last week."}
        stale = agent.patch(locations[1], json=change, headers={"If-Match": '"7"'})
        statuses[_expect(stale, 409).status_code] += 1
        fresh = agent.patch(locations[1], json=change, headers={"If-Match": '"1"'})
        statuses[_expect(fresh, 200).status_code] += 1

        for query in SEARCHES:
            statuses[_expect(agent.post("/v1/search", json={"query": query}), 200).status_code] += 1
        statuses[_expect(agent.get(locations[0] + "0"), 404, 422).status_code] += 1
        forgotten = agent.delete(locations[4])
        statuses[_expect(forgotten, 200).status_code] += 1

        for n in range(3):  # one write a minute: the second and third are refused
            write(limited, f"Burst note {n}: the staging cluster restarts at noon.", 201, 429)
    if not statuses[429]:
        raise AssertionError("the limited agent was never refused: no 429 to count")
    return statuses


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
