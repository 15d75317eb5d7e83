"""Why a JSON-RPC message is refused, in one sentence that quotes none of it.

The SDK refuses a body that is no JSON-RPC 2.0 message over HTTP with ``-32602`` and
pydantic's whole report (documentation links and the message's own text, a record's content
included), and a known method's params, or a request sent before ``initialize`` over stdio,
with ``-32602 Invalid request parameters`` and an empty ``data``. :func:`shape_reason` and
:func:`message_reason` name what is wrong with a message before the SDK sees it (both
transports answer it ``-32600``); :class:`ParamsReasons`, a middleware of the server, names
the parameter the SDK refused (its place and the rule, never its value) or says to
initialise first.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, jsonrpc_message_adapter
from pydantic import ValidationError

#: What the SDK's refusal says (runner and dispatcher alike); its ``data`` is empty.
SDK_REFUSAL = "Invalid request parameters"
#: At most this many refused parameters are named, each place cut to this many characters.
MAX_NAMED = 4
MAX_PLACE = 80


def shape_reason(parsed: object) -> str | None:
    """Why ``parsed`` (JSON already read) is not shaped as one JSON-RPC 2.0 message (a batch,
    not an object, another ``jsonrpc``, a method that is no string, neither a method nor a
    result nor an error), or None."""
    if isinstance(parsed, list):
        return "a batch (a JSON array) is not accepted: send one JSON-RPC message per request"
    if not isinstance(parsed, dict):
        return "a JSON-RPC message is a JSON object"
    if parsed.get("jsonrpc") != "2.0":
        return 'jsonrpc: a JSON-RPC 2.0 message says "jsonrpc": "2.0"'
    if "method" in parsed:
        if not isinstance(parsed["method"], str):
            return "method: the method's name, a string"
    elif "result" not in parsed and "error" not in parsed:
        return "method: a request or notification names its method (a string)"
    return None


def message_reason(message: object) -> str | None:
    """Why a message :func:`shape_reason` passed is still none the SDK reads, or None."""
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return "not a JSON-RPC 2.0 request, notification or response"
    return None


def refused_params(exc: ValidationError) -> str:
    """The places and rules of the first refused parameters of ``exc`` (no input value)."""
    named: list[str] = []
    for error in exc.errors(include_input=False, include_url=False)[:MAX_NAMED]:
        parts = [str(part) for part in error["loc"]]
        if parts[:1] != ["params"]:
            parts.insert(0, "params")
        place = ".".join(parts)
        if len(place) > MAX_PLACE:
            place = place[: MAX_PLACE - 1] + "…"
        named.append(f"{place}: {error['msg']}")
    return "; ".join(named) or "params: not what the method takes"


class ParamsReasons:
    """Server middleware: a request the SDK refuses with an empty ``-32602`` gets a reason."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            if ctx.request_id is None:
                raise  # a notification: the SDK drops it, no one waits for an answer
            reason = refused_params(exc)
        except MCPError as exc:
            if exc.code != INVALID_PARAMS or exc.message != SDK_REFUSAL or exc.data:
                raise
            # The only empty refusal left once params are valid: the initialisation gate.
            reason = "the session is not initialised: send initialize first, then the request"
        raise MCPError(INVALID_PARAMS, f"{SDK_REFUSAL}: {reason}", data=reason) from None
