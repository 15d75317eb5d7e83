"""The shipped dashboard and alert rules against a real `engram serve` and a real Prometheus:
promtool accepts the configuration and the rules, the consolidation alerts fire on the series
``alert_rules.test.yml`` gives them, and after a small workload every panel query and every
alert condition returns at least one series."""

from __future__ import annotations

import math
import subprocess
import time
from typing import Any

import httpx

from tests.ops.queries import REPO, Query, alert_queries, load_dashboard, load_rules, panel_queries
from tests.ops.stack import Prometheus, Stack
from tests.ops.workload import drive

#: Before the workload: two scrapes, so every counter's rise falls between two samples, the
#: last of them let in (``up`` is 0 for a scrape refused, 401, for want of the metrics token).
SCRAPED = ['count_over_time(up{job="engram"}[1m]) >= 2', 'up{job="engram"} == 1']
#: Before the queries are judged: the workload scraped a few times over, a job run, the
#: caught-up nightly consolidation, a batch sent to the model.
SETTLED = [
    'count_over_time(engram_http_requests_total{status="429"}[1m]) >= 3',
    'engram_job_last_success_timestamp_seconds{name="consolidation_deep"}',
    'engram_job_last_success_timestamp_seconds{name="decay_refresh"}',
    "engram_embedding_batch_size_count > 0",
]


def _promtool(*args: str) -> str:
    done = subprocess.run(  # noqa: S603 - the installed promtool on the shipped files
        ["promtool", *args],  # noqa: S607
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = (done.stdout + done.stderr).strip()
    print(f"$ promtool {' '.join(args)}\n{output}")
    assert 0 == done.returncode, output
    return output


def test_the_shipped_prometheus_configuration_passes_promtool(prometheus_binaries: None) -> None:
    """`promtool check config deploy/prometheus.yml` from the repository root passes, rule file
    included."""
    del prometheus_binaries
    assert "alerts.yml" in _promtool("check", "config", "deploy/prometheus.yml")


def test_the_shipped_alert_rules_pass_promtool(prometheus_binaries: None) -> None:
    """`promtool check rules deploy/alerts.yml` passes."""
    del prometheus_binaries
    _promtool("check", "rules", "deploy/alerts.yml")


def test_the_consolidation_alerts_fire_on_failed_batches(prometheus_binaries: None) -> None:
    """`promtool test rules tests/ops/alert_rules.test.yml`: a level whose consolidation batches
    fail with none committing fires EngramConsolidationFailing, and EngramJobStale when they
    are the nightly pass's, although no job failed (a job's pass does not fail for failed
    batches, ADR-019); a level whose batches also commit fires neither."""
    del prometheus_binaries
    assert "SUCCESS" in _promtool("test", "rules", "tests/ops/alert_rules.test.yml")


def test_the_scrape_needs_the_token_prometheus_presents(stack: Stack) -> None:
    """engram refuses a scrape without a token (401) and Prometheus, presenting the metrics
    token from the file the shipped job names, scrapes it successfully."""
    assert 401 == httpx.get(f"{stack.engram.base}/metrics", timeout=5).status_code
    _wait_for(stack.prometheus, ['up{job="engram"} == 1'])


def test_every_panel_and_alert_returns_data(stack: Stack) -> None:
    """After a workload over the REST API, each dashboard query and each alert condition gives
    Prometheus at least one series, and every rule evaluates without error."""
    prometheus = stack.prometheus
    _wait_for(prometheus, SCRAPED)
    statuses = drive(stack)
    print(f"\nworkload answered: {dict(sorted(statuses.items()))}")
    _wait_for(prometheus, SETTLED)

    queries = panel_queries(load_dashboard()) + alert_queries(load_rules())
    judged = time.monotonic()
    empty = []
    print(f"\nevaluating against Prometheus {prometheus.version()} at {prometheus.base}")
    for query in queries:
        series = prometheus.query(query.expr)
        print(_line(query, series))
        if not series:
            empty.append(f"{query.kind} {query.title}: {query.expr}")

    rules = prometheus.rules()
    unhealthy = [f"{r['name']}: {r.get('lastError')}" for r in rules if r["health"] != "ok"]
    print(f"\nrules loaded by Prometheus: {len(rules)}, evaluating with errors: {len(unhealthy)}")
    panels = sum(query.kind == "panel" for query in queries)
    print(
        f"{panels} panel queries and {len(queries) - panels} alert conditions evaluated: "
        f"{len(queries) - len(empty)} returned data, {len(empty)} empty "
        f"(queries {time.monotonic() - judged:.1f} s; "
        f"{time.monotonic() - stack.started:.1f} s since the stack began starting)"
    )
    assert [] == unhealthy
    assert [] == empty, "queries without data:\n" + "\n".join(empty)


def _wait_for(prometheus: Prometheus, wanted: list[str], within: float = 60.0) -> None:
    """Wait until each of ``wanted`` has a series and every rule was evaluated once."""
    deadline = time.monotonic() + within
    missing = wanted
    while time.monotonic() < deadline:
        missing = [expr for expr in wanted if not prometheus.query(expr)]
        evaluated = all(
            not str(rule.get("lastEvaluation", "0001")).startswith("0001")
            for rule in prometheus.rules()
        )
        if not missing and evaluated:
            return
        time.sleep(0.5)
    raise AssertionError(f"still no data after {within:.0f} s for: {missing}")


def _line(query: Query, series: list[dict[str, Any]]) -> str:
    label = f"{query.kind:5} {query.title}"
    if not series:
        return f"{label}\n      EMPTY  {query.expr}"
    first = max(series, key=_magnitude)  # the most telling series: the largest number
    labels = ",".join(
        f'{key}="{value}"' for key, value in sorted(first["metric"].items()) if key != "__name__"
    )
    value = first["value"][1]
    if query.kind == "alert":
        value = {"0": "0 (not firing)", "1": "1 (would fire)"}.get(value, value)
    more = f" (+{len(series) - 1} more)" if len(series) > 1 else ""
    return f"{label}\n      {len(series):3} series  {{{labels}}} = {value}{more}"


def _magnitude(one: dict[str, Any]) -> float:
    number = float(one["value"][1])
    return number if math.isfinite(number) else -math.inf
