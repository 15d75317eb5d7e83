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
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import anyio
import structlog
from mcp.server.stdio import stdio_server

from engram.config import EngramSettings
from engram.errors import ConfigurationError
from engram.kernel import open_kernel
from engram.protocols.mcp.server import build_server
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


class _PipeLines:
    """Lines of stdin read by the event loop itself, so a cancelled session stops at once
    (a reader thread blocked in ``read`` would hold the process until the client writes)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


async def _stdin_lines() -> Any:
    """stdin as an async iterable of lines; the SDK's own (thread) reader when stdin is not a
    pipe, socket or terminal (a regular file, say), which the event loop cannot watch."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (ValueError, OSError):
        return None
    return _PipeLines(reader)


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
        stdin = await _stdin_lines()
        async with stdio_server(stdin=stdin, stdout=anyio.wrap_file(stdout)) as (
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
