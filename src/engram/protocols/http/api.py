"""The REST API assembled onto an application: routes, problem+json errors, OpenAPI extras."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from engram.protocols.http import admin, memories, search
from engram.protocols.http.models import write_schemas
from engram.protocols.http.problems import ProblemDetails, install_problem_handlers

TAGS = [
    {"name": "memories", "description": "Propose, read, update and forget records (the Gate)."},
    {"name": "search", "description": "Search and feedback."},
    {"name": "admin", "description": "Audit log, quarantine and escalations (admin agents)."},
    {
        "name": "operations",
        "description": "Liveness and readiness (no token; a failure's reason only for what "
        "/metrics accepts) and metrics (the metrics token, or an agent cleared to read every "
        "access level).",
    },
]
DESCRIPTION = (
    "A governed memory kernel for AI agents. Every call under /v1 needs an agent token "
    "(`Authorization: Bearer engram_…`). Errors are RFC 9457 problem details "
    "(`application/problem+json`). Record versions are entity tags: reads answer `ETag`, "
    "updates require `If-Match`."
)


def install_api(app: FastAPI) -> None:
    """Add the /v1 routes, the error handlers and the extra OpenAPI components to ``app``."""
    app.include_router(memories.router)
    app.include_router(search.router)
    app.include_router(admin.router)
    install_problem_handlers(app)
    app.openapi_tags = [*(app.openapi_tags or []), *TAGS]
    app.description = app.description or DESCRIPTION
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        if "Problem" not in components:
            for name, definition in write_schemas().items():
                components.setdefault(name, definition)
            components["Problem"] = ProblemDetails.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
