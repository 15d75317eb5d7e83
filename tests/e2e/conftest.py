"""Fixtures of the end-to-end tests: a real `engram serve` process on loopback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_serve import ENGRAM, _env, _free_port

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")


@dataclass
class Served:
    """A running server, its address, and what it printed so far."""

    process: subprocess.Popen[bytes]
    base: str
    env: dict[str, str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def first_serve(tmp_path: Path, model_dir: Path) -> Iterator[Served]:
    """`engram serve` on a free loopback port with a fresh data dir, ready, its output read."""
    env = _env(tmp_path / "engram-data", model_dir, ENGRAM_PORT=str(_free_port()))
    server = start_serve(env)
    try:
        yield server
    finally:
        close(server)


def start_serve(env: dict[str, str]) -> Served:
    """Start `engram serve` in its own session with ``env`` and wait (60 s at most) until it is
    ready or has exited; a second call on the same data dir restarts it there."""
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [*ENGRAM, "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Served(process, f"http://127.0.0.1:{env['ENGRAM_PORT']}", env)

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            server.lines.append(raw.decode(errors="replace").rstrip("\n"))

    server.reader = threading.Thread(target=read, daemon=True)
    server.reader.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{server.base}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return server


def close(server: Served) -> None:
    """Stop a started server as Ctrl-C would and release its output pipe."""
    stop(server.process)
    if server.reader is not None:
        server.reader.join(5)
        if server.reader.is_alive():
            return  # a leftover child holds the pipe; closing it would block on the reader
    if server.process.stdout is not None:
        server.process.stdout.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session as Ctrl-C would (uvicorn, the model workers
    and the embedded PostgreSQL shut down in order); kill the group if it hangs."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
