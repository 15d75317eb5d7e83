"""MCP over stdin/stdout for one agent: what `engram mcp` runs.

In this mode stdout carries the protocol and nothing else. Before anything starts (the
embedded PostgreSQL, the model and its workers if any, logging), file descriptor 1 is
pointed at stderr and the protocol writes to a private duplicate of the original stdout,
which child processes do not inherit. A stray ``print`` or a child's output therefore lands
in stderr, never inside the JSON-RPC stream. Logging already goes to stderr
(``configure_logging``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, TextIO

import anyio
import structlog
from mcp import types as mcp_types
from mcp.server.stdio import stdio_server

from engram.config import EngramSettings
from engram.errors import ConfigurationError
from engram.kernel import open_kernel
from engram.protocols.mcp.depth import readable
from engram.protocols.mcp.server import INVALID_REQUEST, build_server, message_problem
from engram.protocols.mcp.tools import EngramTools

log = structlog.get_logger("engram.mcp")


@contextmanager
def _protocol_stdout() -> Iterator[TextIO]:
    """A text stream on the real stdout, while fd 1 itself points at stderr."""
    sys.stdout.flush()
    wire = os.dup(1)  # not inheritable: children never see the protocol stream
    os.dup2(2, 1)
    try:
        with io.TextIOWrapper(
            os.fdopen(wire, "wb", buffering=0, closefd=False), encoding="utf-8", newline="\n"
        ) as stream:
            yield stream
    finally:
        os.dup2(wire, 1)
        os.close(wire)


#: Longest JSON-RPC line accepted on stdin (a record is at most 16,000 characters).
MAX_LINE_BYTES = 16 * 2**20


class _SerialWriter:
    """The protocol's output, one whole line per write: the SDK's answers and the ones this
    module gives itself to lines the SDK would drop go out one after the other."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._lock = asyncio.Lock()

    async def write(self, data: str) -> None:
        async with self._lock:
            await self._stream.write(data)

    async def flush(self) -> None:
        async with self._lock:
            await self._stream.flush()


def line_problem(line: str) -> tuple[int, str] | None:
    """The JSON-RPC error a line gets before the SDK sees it, for lines the SDK would drop
    without an answer (the client would wait for ever): text that is not JSON or holds a lone
    surrogate (-32700), a request whose id is missing or neither a string nor an integer
    (-32600), and a tools/call naming no tool or with arguments that are not an object
    (-32602, which the SDK answers without a reason)."""
    if not line.strip():
        return None
    try:
        parsed = json.loads(line)
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return -32700, "Parse error: not JSON text in UTF-8"
    if (problem := message_problem(parsed)) is not None:
        code, message = problem
        kind = "Invalid request" if code == INVALID_REQUEST else "Invalid params"
        return code, f"{kind}: {message}"
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError: JSON, but no JSON-RPC message
        return -32600, "Invalid request: not a JSON-RPC 2.0 message"
    return None


class _PipeLines:
    """Lines of stdin read by the event loop itself, so a cancelled session stops at once
    (a reader thread blocked in ``read`` would hold the process until the client writes).
    A line the SDK would drop unanswered is answered here instead (:func:`line_problem`)."""

    def __init__(self, readline: Callable[[], Awaitable[bytes]], writer: _SerialWriter) -> None:
        self._readline = readline
        self._writer = writer

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                raw = await self._readline()
            except ValueError:  # longer than MAX_LINE_BYTES; its tail comes as the next line
                await self._answer(-32600, "Invalid request: a line longer than 16 MiB")
                continue
            if not raw:
                raise StopAsyncIteration
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:  # decoded with replacement marks, it would be stored so
                await self._answer(-32700, "Parse error: not JSON text in UTF-8")
                continue
            # nesting or integers past what the SDK's parser reads are made readable, so the
            # Gate refuses them (audited)
            line = readable(line) or line
            problem = line_problem(line)
            if problem is None:
                return line
            await self._answer(*problem)

    async def _answer(self, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        await self._writer.write(json.dumps(error) + "\n")
        await self._writer.flush()


async def _stdin_lines(writer: _SerialWriter) -> _PipeLines:
    """stdin as an async iterable of lines, each checked as :class:`_PipeLines` does. A pipe,
    socket or terminal is watched by the event loop; a regular file (``engram mcp < calls``),
    which the loop cannot watch, is read line by line in a thread (a read of a file never
    waits for a writer, so nothing holds the process when the session is cancelled)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (ValueError, OSError):
        return _PipeLines(_file_readline(sys.stdin.buffer), writer)
    return _PipeLines(reader.readline, writer)


def _file_readline(stream: BinaryIO) -> Callable[[], Awaitable[bytes]]:
    """``readline`` of a file with the pipe reader's limit: a longer line raises ValueError
    and its tail comes as the next line."""

    async def readline() -> bytes:
        raw = await asyncio.to_thread(stream.readline, MAX_LINE_BYTES + 1)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise ValueError("line longer than MAX_LINE_BYTES")
        return raw

    return readline


async def serve_stdio(settings: EngramSettings, stdout: TextIO) -> None:
    """Open the kernel, authenticate ``ENGRAM_AGENT_TOKEN`` and serve until stdin closes."""
    token = settings.agent_token.get_secret_value().strip() if settings.agent_token else ""
    if not token:
        raise ConfigurationError(
            "ENGRAM_AGENT_TOKEN is not set: `engram mcp` acts for one agent and needs its token "
            "(shown once when the agent was added)"
        )
    # SIGTERM (what a client sends when it quits without closing our stdin) ends the session
    # like end of input: the serving task is cancelled and the kernel closes in order.
    serving = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if serving is not None:
        loop.add_signal_handler(signal.SIGTERM, serving.cancel)
    async with open_kernel(settings=settings) as kernel:
        principal = await kernel.agents.authenticate(token)
        server = build_server(EngramTools(kernel), lambda _ctx: principal)
        log.info("mcp.stdio.serving", agent=principal.agent.name)
        writer = _SerialWriter(anyio.wrap_file(stdout))
        stdin = await _stdin_lines(writer)
        async with stdio_server(stdin=stdin, stdout=writer) as (  # type: ignore[arg-type]
            read_stream,
            write_stream,
        ):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        log.info("mcp.stdio.closed", agent=principal.agent.name)


def run_stdio(settings: EngramSettings) -> None:
    """Serve MCP over stdio (blocking); raises :class:`EngramError` for the CLI to report."""
    with _protocol_stdout() as stdout:
        try:
            asyncio.run(serve_stdio(settings, stdout))
        except asyncio.CancelledError:
            log.info("mcp.stdio.terminated")
