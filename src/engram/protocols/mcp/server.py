"""The MCP server object: engram's tools on the SDK's low-level :class:`Server`.

The low-level server is used rather than the decorator-based one because every argument
must reach engram as the client sent it (record fields are validated, and audited when
malformed, by the Gate, not by the SDK) and every outcome must be a result engram shaped.
Who the caller is comes from a transport-specific function: stdio has one agent for the
whole process, HTTP one per request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server import Server, ServerRequestContext
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

from engram import __version__
from engram.agents.registry import Principal
from engram.protocols.mcp.envelope import ParamsReasons, message_reason, shape_reason
from engram.protocols.mcp.results import failure
from engram.protocols.mcp.tools import EngramTools

#: The methods a client sends as notifications (no id, no answer) all start so (MCP spec).
NOTIFICATION_PREFIX = "notifications/"


#: JSON-RPC error codes engram answers before the SDK sees a message.
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def message_problem(parsed: object) -> tuple[int, str] | None:
    """The JSON-RPC error of a parsed body the SDK would drop unanswered or refuse without a
    clear reason, or None. A batch, a value that is no JSON-RPC 2.0 message, or a request
    whose ``id`` is missing or neither a string nor an integer (1.5, true, an object: the SDK
    reads it as a notification and does nothing; only ``notifications/…`` methods may come
    without an id) is an invalid request (-32600); a ``tools/call`` that names no tool or
    whose arguments are not an object, or params that are not an object, invalid params."""
    if (reason := shape_reason(parsed)) is not None or not isinstance(parsed, dict):
        return INVALID_REQUEST, reason or "a JSON-RPC message is a JSON object"
    method = parsed.get("method")
    if "id" not in parsed:
        if isinstance(method, str) and not method.startswith(NOTIFICATION_PREFIX):
            return INVALID_REQUEST, (
                "id: a request needs one (a string or an integer); notifications go without"
            )
    else:
        value = parsed["id"]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return INVALID_REQUEST, "id: a JSON-RPC request id is a string or an integer"
    if method == "tools/call" and (problem := _call_problem(parsed.get("params"))):
        return INVALID_PARAMS, problem
    params = parsed.get("params")
    if method is not None and params is not None and not isinstance(params, dict):
        return INVALID_PARAMS, "params: an object when present"
    if (reason := message_reason(parsed)) is not None:
        return INVALID_REQUEST, reason
    return None


def _call_problem(params: object) -> str | None:
    """Why the params of a ``tools/call`` are not a tool's name and its arguments, or None."""
    if not isinstance(params, dict) or not isinstance(params.get("name"), str):
        return "params: a tools/call names its tool (name, a string)"
    if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
        return "params.arguments: the tool's arguments, as an object"
    return None


#: Finds the principal of a request (None: not authenticated).
PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal | None]

INSTRUCTIONS = """\
engram is a governed long-term memory shared by agents. Call `recall` before answering \
anything that may depend on earlier work, decisions or preferences. Call `remember` for \
durable knowledge worth keeping (one fact, decision, event, procedure, entity, preference, \
conclusion or pointer per call), choosing the memory type carefully. Every write passes the \
Librarian Gate, which may reject it with the reasons; fix the input rather than retrying \
unchanged. To change a memory, read it (`get` or `recall`) and `update` it with the version \
you read; use `forget` for memories that are wrong. Rate memories you relied on with \
`feedback`. `history` and the as_of arguments show how memory looked in the past."""


def build_server(tools: EngramTools, principal_of: PrincipalOf) -> Server[Any]:
    """An MCP server exposing ``tools``, each call acting for ``principal_of(request)``."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools.definitions())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        principal = principal_of(ctx)
        if principal is None:
            return failure("unauthenticated", "a valid agent token is required")
        return await tools.call(params.name, params.arguments, principal)

    server: Server[Any] = Server(
        "engram",
        version=__version__,
        title="engram memory",
        description="Governed long-term memory for AI agents",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # A request the SDK refuses with an empty -32602 gets its reason (mcp.envelope).
    server.middleware.append(ParamsReasons())
    return server
