"""Hostile pass AC against a real `engram serve`: what the HTTP server answers to HEAD.

Found here (the test failed before its fix): ``HEAD`` was ``405 Method Not Allowed`` on every
route but ``/openapi.json`` and ``/docs`` (``Allow: GET``), ``/healthz`` and ``/readyz``
included, although RFC 9110 (section 9.1) says a general-purpose server must support GET and
HEAD; a load balancer or uptime check probing with HEAD (``curl -I``) saw engram as down.
"""

from __future__ import annotations

import httpx

from tests.e2e.conftest import TOKEN, Served


def test_head_answers_as_get_without_the_body_on_one_kept_alive_connection(
    first_serve: Served,
) -> None:
    """HEAD of each readable route answers the status and headers GET gives (ETag and
    Content-Length included) with no body; a route that takes no GET still answers 405, and
    the connection stays usable for the next request."""
    found = TOKEN.search(first_serve.output())
    assert found is not None, first_serve.output()
    auth = {"Authorization": f"Bearer {found.group(0)}"}
    with httpx.Client(base_url=first_serve.base, headers=auth, timeout=30) as client:
        created = client.post(
            "/v1/memories",
            json={"type": "belief", "content": "The on-call rota is kept in the ops wiki."},
        )
        assert 201 == created.status_code, created.text
        record = created.headers["location"]
        for path in ("/healthz", "/readyz", "/metrics", record, f"{record}/versions"):
            got, head = client.get(path), client.head(path)
            assert (200, 200, b"") == (got.status_code, head.status_code, head.content), path
            # /healthz, /readyz and /metrics answer figures that move between two requests
            same = ["content-type"]
            if "/v1/" in path:
                same += ["content-length", "etag"]
            for name in same:
                assert got.headers.get(name) == head.headers.get(name), (path, name)
            assert "content-length" in head.headers, path
        refused = client.head("/v1/search")
        assert (405, "POST", b"") == (
            refused.status_code,
            refused.headers["allow"],
            refused.content,
        )
        stranger = httpx.head(f"{first_serve.base}/v1/audit", timeout=30)
        assert 401 == stranger.status_code
        after = client.get("/healthz")  # the kept-alive connection still frames answers
        assert (200, {"status": "ok"}) == (after.status_code, after.json())
