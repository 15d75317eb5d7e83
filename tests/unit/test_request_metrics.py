"""HTTP requests counted and timed by route template, method and status (RequestMetrics)."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from engram.observability.metrics import EngramMetrics
from engram.protocols.http.problems import BodyLimit
from engram.protocols.http.telemetry import RequestMetrics


def _app(metrics: EngramMetrics) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/memories/{record_id}")
    async def read(record_id: str) -> dict[str, str]:
        return {"id": record_id}

    @app.post("/v1/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_middleware(BodyLimit, max_bytes=10)
    app.add_middleware(RequestMetrics)
    app.state.kernel = SimpleNamespace(metrics=metrics)
    return app


def _count(metrics: EngramMetrics, route: str, method: str, status: str) -> float | None:
    return metrics.registry.get_sample_value(
        "engram_http_requests_total", {"route": route, "method": method, "status": status}
    )


def test_requests_are_labelled_by_route_template_not_path() -> None:
    """Two record ids are one series; unknown paths and odd methods share one label each."""
    metrics = EngramMetrics()
    with TestClient(_app(metrics), raise_server_exceptions=False) as client:
        assert 200 == client.get("/v1/memories/a").status_code
        assert 200 == client.get("/v1/memories/b").status_code
        assert 404 == client.get("/v1/memories").status_code
        assert 405 == client.request("PURGE", "/v1/memories/a").status_code
        assert 500 == client.post("/v1/boom").status_code
        assert 413 == client.post("/v1/boom", content=b"x" * 100).status_code
    template = "/v1/memories/{record_id}"
    assert 2 == _count(metrics, template, "GET", "200")
    assert 1 == _count(metrics, "unmatched", "GET", "404")
    assert 1 == _count(metrics, template, "other", "405")
    assert 1 == _count(metrics, "/v1/boom", "POST", "500")
    assert 1 == _count(metrics, "/v1/boom", "POST", "413")
    seconds = metrics.registry.get_sample_value(
        "engram_http_request_seconds_count", {"route": template, "method": "GET"}
    )
    assert 2 == seconds


def test_a_body_refused_before_routing_counts_under_its_included_routers_template() -> None:
    """A 413 answered on its Content-Length, before routing, is labelled with the template of
    a route added by ``include_router`` (as every /v1 route is), not ``unmatched``."""
    metrics = EngramMetrics()
    router = APIRouter(prefix="/v1")

    @router.post("/memories/{record_id}")
    async def write(record_id: str) -> dict[str, str]:
        return {"id": record_id}

    app = FastAPI()
    app.include_router(router)
    app.add_middleware(BodyLimit, max_bytes=10)
    app.add_middleware(RequestMetrics)
    app.state.kernel = SimpleNamespace(metrics=metrics)
    with TestClient(app) as client:
        assert 413 == client.post("/v1/memories/a", content=b"x" * 100).status_code
        assert 413 == client.post("/v1/nothing", content=b"x" * 100).status_code
    assert 1 == _count(metrics, "/v1/memories/{record_id}", "POST", "413")
    assert 1 == _count(metrics, "unmatched", "POST", "413")


def test_requests_before_the_kernel_is_there_are_not_recorded() -> None:
    """Without a kernel on the application (before its lifespan) nothing is counted or raised."""
    metrics = EngramMetrics()
    app = _app(metrics)
    del app.state.kernel
    with TestClient(app) as client:
        assert 200 == client.get("/v1/memories/a").status_code
    assert _count(metrics, "/v1/memories/{record_id}", "GET", "200") is None
