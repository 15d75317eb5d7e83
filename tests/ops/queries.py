"""The queries the shipped dashboard and alert rules make, as a test evaluates them.

Grafana's own variables are replaced by a fixed window. An alert expression returns nothing
while it does not fire, so it is evaluated as its *condition*: every comparison gets the
``bool`` modifier, which makes it answer 0 or 1 for each series instead of filtering. The
condition has a series exactly when the data the alert reads is there, whatever the verdict.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "engram.json"
ALERTS = DEPLOY / "alerts.yml"
DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources"

#: Grafana's interval variables and the window the tests put in their place.
GRAFANA_VARIABLES = {
    "${__rate_interval}": "1m",
    "$__rate_interval": "1m",
    "${__interval}": "1m",
    "$__interval": "1m",
    "${__range}": "1m",
    "$__range": "1m",
}
ENGRAM_METRIC = re.compile(r"\bengram_[a-z0-9_]+")
_COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")


@dataclass(frozen=True, slots=True)
class Query:
    """One expression to evaluate: a panel target or an alert's condition."""

    kind: str  # "panel" or "alert"
    title: str
    expr: str


def load_dashboard() -> dict[str, Any]:
    """The dashboard JSON as shipped."""
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def load_rules() -> list[dict[str, Any]]:
    """Every alerting rule of the shipped rule file."""
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def walk_panels(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every panel that is not a row, with the title of the row above it ("" before any)."""
    found: list[tuple[str, dict[str, Any]]] = []
    section = ""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            section = panel.get("title", "")
            found.extend((section, inner) for inner in panel.get("panels", []))
        else:
            found.append((section, panel))
    return found


def substitute(expr: str) -> str:
    """``expr`` with Grafana's interval variables replaced by a fixed window."""
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def panel_queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every target expression of the dashboard, titled ``row / panel [refId]``."""
    queries = []
    for section, panel in walk_panels(dashboard):
        for target in panel.get("targets", []):
            if target.get("expr"):
                title = f"{section} / {panel['title']} [{target.get('refId', '?')}]"
                queries.append(Query("panel", title.lstrip(" /"), substitute(target["expr"])))
    return queries


def alert_queries(rules: list[dict[str, Any]]) -> list[Query]:
    """The condition of every alert (see :func:`as_condition`)."""
    return [Query("alert", rule["alert"], as_condition(rule["expr"])) for rule in rules]


def as_condition(expr: str) -> str:
    """``expr`` with ``bool`` after every comparison operator that lacks it.

    Label matchers (``{...}``), strings and ranges are copied as they are, so ``=~``, ``!=``
    inside a selector and durations are never touched.
    """
    out: list[str] = []
    depth, quote, i = 0, "", 0
    while i < len(expr):
        char = expr[i]
        if quote:
            out.append(char)
            if char == "\\" and i + 1 < len(expr):
                out.append(expr[i + 1])
                i += 1
            elif char == quote:
                quote = ""
            i += 1
            continue
        if char in "\"'`":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif depth == 0:
            operator = next((op for op in _COMPARISONS if expr.startswith(op, i)), None)
            if operator is not None:
                out.append(operator)
                i += len(operator)
                if not expr[i:].lstrip().startswith("bool"):
                    out.append(" bool")
                continue
        out.append(char)
        i += 1
    return "".join(out)


def engram_metrics(expr: str) -> set[str]:
    """The engram metric names ``expr`` reads, as exported (``_bucket`` etc. included)."""
    return set(ENGRAM_METRIC.findall(expr))
