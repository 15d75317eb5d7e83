"""What the memory tools answer: the models of their ``structuredContent`` and the output
schemas built from them.

Every tool declares an ``outputSchema`` that holds for each of its results, errors included:
the properties of its success body plus ``error``, and an ``anyOf`` that asks for either the
success body's required fields or ``error``. A Gate rejection or conflict of a write has the
success shape (a decision), flagged ``isError``; every other failure is ``{"error": ...}``.
The success bodies are the shapes of :mod:`engram.protocols.views`, the HTTP API's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from engram.memory.types import AccessLevel, MemoryRecord, TrustLevel

#: Every ``error.kind`` a tool result may carry.
ErrorKind = Literal[
    "invalid_input",
    "not_found",
    "forbidden",
    "rate_limited",
    "unauthenticated",
    "already_exists",
    "version_conflict",
    "unavailable",
    "refused",
    "unknown_tool",
    "internal",
]


class ErrorDetail(BaseModel):
    """Why a call failed; the fields after ``message`` appear where they apply."""

    kind: ErrorKind
    message: str
    errors: list[str] | None = Field(default=None, description="Each invalid input, where: what.")
    error_id: str | None = Field(default=None, description="Id of an internal error in the log.")
    expected_version: int | None = None
    current_version: int | None = None
    retry_after_seconds: float | None = None


class ErrorView(BaseModel):
    """A failed call."""

    error: ErrorDetail


class RecordView(BaseModel):
    """One version of a record (``get``)."""

    record: MemoryRecord


class PageView(BaseModel):
    """A page of records, newest change first (``list``)."""

    records: list[MemoryRecord]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class AgentView(BaseModel):
    """The calling agent as engram knows it."""

    name: str
    trust_level: TrustLevel
    read_level: AccessLevel = Field(description="The most closed access level it may read.")
    write_level: AccessLevel = Field(description="The most closed access level it may write.")
    can_write: bool


class HealthView(BaseModel):
    """Whether engram can serve the tools now (``health``)."""

    ready: bool = Field(description="True when every check passed.")
    checks: dict[str, bool] = Field(
        description=(
            "database: memory can be read; migrations: its schema is current; "
            "embedding_model: recall matches by meaning (else by keywords only); "
            "gate, audit_log: writes can be decided and recorded."
        )
    )
    agent: AgentView


def inline_schema(model: type[BaseModel], *, output: bool = False) -> dict[str, Any]:
    """A model's JSON schema with ``$ref``s inlined and generated titles dropped.

    Inline enums read better for a language model than references into ``$defs``; their
    docstrings are left out, since each field's own description covers them. An ``output``
    schema describes what engram renders, so it has no defaults either.
    """
    raw = model.model_json_schema(mode="serialization" if output else "validation")
    defs: dict[str, Any] = raw.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = dict(defs[ref.removeprefix("#/$defs/")])
                target.pop("description", None)
                merged = {**target, **node}
                merged.pop("$ref")
                return resolve(merged)
            return {
                key: resolve(value)
                for key, value in node.items()
                if not (key == "title" and isinstance(value, str))
                and not (output and key == "default")
            }
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    schema: dict[str, Any] = resolve(raw)
    schema.pop("description", None)
    if output:
        _drop_record_fields(schema)
    return schema


def _drop_record_fields(node: Any) -> None:
    """Leave out of each record schema the field records are rendered without."""
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict) and {"record_id", "expected_version"} <= set(properties):
            del properties["expected_version"]
        for value in node.values():
            _drop_record_fields(value)
    elif isinstance(node, list):
        for item in node:
            _drop_record_fields(item)


def output_schema(success: type[BaseModel]) -> dict[str, Any]:
    """The output schema of a tool whose successful results are ``success`` bodies."""
    schema = inline_schema(success, output=True)
    required = schema.pop("required", [])
    schema["properties"]["error"] = inline_schema(ErrorView, output=True)["properties"]["error"]
    schema["anyOf"] = [{"required": required}, {"required": ["error"]}]
    return schema
