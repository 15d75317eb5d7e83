"""The operator documentation names what the code has: settings, commands, routes, tools,
metrics, jobs, the schema revision, and links that lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import typer

from engram.autonomy.catalogue import standard_jobs
from engram.config import EngramSettings
from engram.observability.metrics import EngramMetrics
from engram.protocols.cli.main import app as cli_app
from engram.protocols.http.app import create_app
from engram.protocols.mcp.tools import SPECS
from tests.unit.runtime_fakes import FakeBreaker, FakePool, FakeQueue

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
ROW = re.compile(r"^\| `(ENGRAM_[A-Z_]+)` \| ([^|]+) \|", re.MULTILINE)
#: A table row of docs/operations.md naming a metric: name, type, labels.
METRIC_ROW = re.compile(r"^\| `(engram_[a-z0-9_]+)` \| (\w+) \|([^|]*)\|", re.MULTILINE)
#: A table row of docs/operations.md naming a job.
JOB_ROW = re.compile(r"^\| `([a-z_]+)` \| ", re.MULTILINE)
#: A Markdown link outside code: its target.
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _documented() -> dict[str, str]:
    return {name: default.strip() for name, default in ROW.findall(README.read_text())}


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def test_every_setting_is_documented_with_its_default() -> None:
    """Each EngramSettings field appears in the README table with the code's default."""
    expected = {
        f"ENGRAM_{name.upper()}": _shown(field.default)
        for name, field in EngramSettings.model_fields.items()
    }
    assert expected == _documented()


def test_readme_opens_with_the_two_commands() -> None:
    """The Quick start names `make run` and `make test` before anything else."""
    text = README.read_text()
    quick_start = text.index("## Quick start")
    assert quick_start < text.index("make run") < text.index("## Configuration")
    assert quick_start < text.index("make test") < text.index("## Configuration")


def test_the_readme_start_shows_the_schema_the_code_migrates_to() -> None:
    """The `kernel.opened` line of the Quick start names the newest migration revision."""
    versions = REPO / "src" / "engram" / "infra" / "migrations" / "versions"
    head = max(path.name[:4] for path in versions.glob("[0-9][0-9][0-9][0-9]_*.py"))
    shown = re.search(r"kernel\.opened .*schema=(\d{4})", README.read_text())
    assert shown is not None
    assert head == shown.group(1)


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """The commands under a (typer's own click) group, by their path: `audit verify`."""
    found: dict[str, Any] = {}
    for name, command in getattr(group, "commands", {}).items():
        path = f"{prefix}{name}"
        found[path] = command
        found |= _commands(command, f"{path} ")
    return found


def test_every_cli_command_and_option_is_in_the_cli_doc() -> None:
    """Each `engram` command is shown in docs/cli.md as `engram <command>` (or, for a
    subcommand, its group's section names it), and each of their options appears there."""
    root = typer.main.get_command(cli_app)
    text = (DOCS / "cli.md").read_text()
    commands = _commands(root)
    missing = [path for path in commands if not re.search(rf"engram {path}\b", text)]
    options = [
        [name for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
        for command in [root, *commands.values()]
        for param in command.params
    ]
    missing += sorted(
        "/".join(names)
        for names in options
        if names and not any(re.search(rf"{name}\b", text) for name in names)
    )
    assert [] == missing


def test_every_rest_route_is_in_the_api_doc() -> None:
    """Each route of the FastAPI app (``{record_id}`` written ``{id}``) heads or names its
    section in docs/api.md as `METHOD /path`, and no section names a route that is not there."""
    spec = create_app(EngramSettings()).openapi()
    routes = {
        f"{method.upper()} {path.replace('{record_id}', '{id}')}"
        for path, operations in spec["paths"].items()
        for method in operations
    }
    text = (DOCS / "api.md").read_text()
    named = set(re.findall(r"`((?:GET|POST|PATCH|DELETE|PUT) /[^`\s]*)`", text))
    assert set() == routes - named
    assert set() == named - routes


def test_the_rate_limited_routes_say_so_in_openapi() -> None:
    """The routes that answer 429 (writes, and ratings past their budget) list it in OpenAPI."""
    spec = create_app(EngramSettings()).openapi()
    limited = {
        f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if "429" in operation["responses"]
    }
    assert {
        "POST /v1/memories",
        "PATCH /v1/memories/{record_id}",
        "DELETE /v1/memories/{record_id}",
        "POST /v1/feedback",
    } == limited


def test_every_mcp_tool_is_in_the_mcp_doc_with_its_required_arguments() -> None:
    """The tools table of docs/mcp.md lists exactly the server's tools, each with the
    arguments its input schema requires."""
    rows = re.findall(
        r"^\| `([a-z_]+)` \| [^|]+ \| ([^|]+) \|$", (DOCS / "mcp.md").read_text(), re.M
    )
    documented = {tool: set(re.findall(r"`([a-z_]+)`", required)) for tool, required in rows}
    expected = {
        spec.name: set(spec.arguments.model_json_schema().get("required", [])) for spec in SPECS
    }
    assert expected == documented


def _registered_metrics() -> dict[str, tuple[str, set[str]]]:
    """Every engram_* family the kernel registers: type and label names."""
    metrics = EngramMetrics()
    metrics.watch(pool=FakePool(), breaker=FakeBreaker(), embeddings=FakeQueue())
    found: dict[str, tuple[str, set[str]]] = {}
    for collector in list(metrics.registry._collector_to_names):  # no public list of collectors
        names = getattr(collector, "_labelnames", None)
        if names is not None:  # a prometheus_client metric (one family, labels declared)
            families = [(collector._name, collector._type, set(names))]
        else:  # a custom collector: its label names are those of its samples
            families = [
                (family.name, family.type, {k for s in family.samples for k in s.labels})
                for family in collector.collect()
            ]
        for name, kind, labels in families:
            if name.startswith("engram_"):
                found[name + "_total" if kind == "counter" else name] = (kind, labels)
    return found


def test_the_metrics_table_matches_the_registry() -> None:
    """docs/operations.md lists every engram metric with its type and labels, and no other."""
    documented = {
        name: (kind, set(re.findall(r"`([a-z_]+)`", labels.split("(")[0])))
        for name, kind, labels in METRIC_ROW.findall((DOCS / "operations.md").read_text())
    }
    assert _registered_metrics() == documented


def test_the_jobs_table_names_every_job() -> None:
    """The background jobs table of docs/operations.md names exactly the catalogue's jobs."""
    consolidation = SimpleNamespace(watch=SimpleNamespace(fast_path_limit=1), release=None)
    jobs = standard_jobs(
        EngramSettings(),
        db=cast(Any, None),
        gate=cast(Any, None),
        consolidation=cast(Any, consolidation),
        temporal=cast(Any, None),
        embedding_ping=cast(Any, None),
        metrics=EngramMetrics(),
        rescan=cast(Any, object()),
    )
    text = (DOCS / "operations.md").read_text()
    table = text[text.index("| Job | Does | When |") :]
    table = table[: table.index("\n\n")]
    assert [job.name for job in jobs] == JOB_ROW.findall(table)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text()), re.MULTILINE):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.replace("`", ""))
        found.add(re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-"))
    return found


def test_relative_links_lead_to_files_and_headings_that_exist() -> None:
    """Every relative link of the README, docs/ and adr/ names a file that exists and, with a
    fragment, a heading of that file."""
    pages = [README, *sorted(DOCS.glob("*.md")), *sorted((REPO / "adr").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path) if path else page
            names_heading = fragment and linked.suffix == ".md"
            if not linked.exists() or (names_heading and fragment not in _anchors(linked)):
                broken.append(f"{page.name}: {target}")
    assert [] == broken
