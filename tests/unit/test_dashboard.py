"""The shipped Grafana dashboard: valid, wired to the provisioned data source, and covering
every metric engram registers (a new metric without a panel fails here)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import yaml

from engram.observability.metrics import EngramMetrics
from tests.ops.queries import (
    DATASOURCES,
    DEPLOY,
    as_condition,
    engram_metrics,
    load_dashboard,
    load_rules,
    panel_queries,
    walk_panels,
)
from tests.unit.runtime_fakes import FakeBreaker, FakePool, FakeQueue

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _exported() -> dict[str, str]:
    """Each name a query may use for an engram metric -> the metric's family name."""
    metrics = EngramMetrics()
    metrics.watch(pool=FakePool(), breaker=FakeBreaker(), embeddings=FakeQueue())
    names = {}
    for family in metrics.registry.collect():
        if family.name.startswith("engram_"):
            for suffix in _SUFFIXES[family.type]:
                names[family.name + suffix] = family.name
    return names


def _datasource() -> dict[str, Any]:
    (path,) = DATASOURCES.glob("*.yml")
    (source,) = yaml.safe_load(path.read_text())["datasources"]
    found: dict[str, Any] = source
    return found


def test_every_registered_metric_has_a_panel() -> None:
    """Every engram metric on the registry is read by at least one panel query."""
    exported = _exported()
    read = {
        name for query in panel_queries(load_dashboard()) for name in engram_metrics(query.expr)
    }
    assert set(exported.values()) == {exported[name] for name in read if name in exported}


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_queries_name_only_metrics_that_exist(source: str) -> None:
    """No panel or alert reads an engram metric the kernel does not export (a typo, a rename)."""
    if source == "dashboard":
        exprs = [query.expr for query in panel_queries(load_dashboard())]
    else:
        exprs = [rule["expr"] for rule in load_rules()]
    read = {name for expr in exprs for name in engram_metrics(expr)}
    assert set() == read - set(_exported())


def test_the_process_is_on_the_dashboard() -> None:
    """CPU, resident memory and open file descriptors of the kernel process have panels."""
    exprs = " ".join(query.expr for query in panel_queries(load_dashboard()))
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert name in exprs


def test_the_dashboard_is_well_formed_grafana() -> None:
    """Unique panel ids, a grid position each, targets with unique refIds and an expression,
    and every panel and target on the provisioned Prometheus data source."""
    dashboard = load_dashboard()
    assert {"uid", "title", "schemaVersion", "panels"} <= set(dashboard)
    every = [panel for _, panel in walk_panels(dashboard)] + [
        panel for panel in dashboard["panels"] if panel["type"] == "row"
    ]
    ids = Counter(panel["id"] for panel in every)
    assert [] == [panel_id for panel_id, n in ids.items() if n > 1]
    source = _datasource()
    assert ("prometheus", "engram-prometheus") == (source["type"], source["uid"])
    wanted = {"type": source["type"], "uid": source["uid"]}
    for _, panel in walk_panels(dashboard):
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        assert wanted == panel["datasource"], panel["title"]
        targets = panel["targets"]
        assert targets, panel["title"]
        assert len(targets) == len({target["refId"] for target in targets}), panel["title"]
        for target in targets:
            assert target["expr"].strip(), panel["title"]
            assert wanted == target["datasource"], panel["title"]


def test_compose_mounts_what_the_provider_reads() -> None:
    """The dashboard provider's folder is where compose mounts deploy/grafana/dashboards."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    (provider_file,) = (DEPLOY / "grafana" / "provisioning" / "dashboards").glob("*.yml")
    (provider,) = yaml.safe_load(provider_file.read_text())["providers"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts
    assert "healthcheck" in compose["services"]["engram"]


@pytest.mark.parametrize(
    ("expr", "condition"),
    [
        ("up{job='engram'} == 0", "up{job='engram'} == bool 0"),
        ('a{x!="1",y=~">"} >= on() 2 * b', 'a{x!="1",y=~">"} >= bool on() 2 * b'),
        ("x > 0.5 and y > bool 1", "x > bool 0.5 and y > bool 1"),
        ("max_over_time(m[26h]) < 3", "max_over_time(m[26h]) < bool 3"),
    ],
)
def test_an_alert_is_judged_by_its_condition(expr: str, condition: str) -> None:
    """Comparisons outside selectors get ``bool``; matchers, strings and ranges stay."""
    assert condition == as_condition(expr)
