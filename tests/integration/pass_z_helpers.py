"""What hostile pass Z's tests share: an outside summariser on loopback that answers every
request slowly (just inside its caller's timeout), one large topic that the planner cuts into
many pieces (each piece one request to it), and a pass's wall-clock time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from uuid import UUID

from engram import Kernel
from engram.memory.types import AccessLevel
from tests.integration.pass_y_helpers import loopback
from tests.integration.test_triggers import episode, write

#: One recurring incident told ten ways: one topic of ten episodes. Each is written 13 hours
#: after the one before, so no two are compared as claims about one moment (the Gate's
#: conflict scope), and all lie within the clustering's time horizon.
RECURRING = [
    "The billing deploy failed again as the build disk on ci-7 was completely full.",
    "Again the billing deploy failed, ci-7's build disk having run out of space.",
    "Once more the billing deployment broke because ci-7's disk had filled up.",
    "The billing deploy broke again, the ci-7 build disk being full once more.",
    "Billing deployment failed anew: no space left on the ci-7 build disk.",
    "Yet again a full build disk on ci-7 made the billing deploy fail.",
    "The ci-7 build disk filled up again and the billing deploy failed with it.",
    "Billing deploy failure again: ci-7 had no free space on its build disk.",
    "The billing deploy failed once more after the build disk on ci-7 ran full.",
    "Another failed billing deploy, again because ci-7's build disk was out of space.",
]
HOURS_APART = 13


@dataclass
class SlowModel:
    """An OpenAI-compatible endpoint answering each request after ``delay`` seconds with an
    empty text (so the planner keeps the extractive one), or with the request's text said
    ``echo`` times over (the sources' texts without their dates: every fact kept, none
    added) and ``tail`` after it; ``asked``
    counts requests and ``times`` keeps when each arrived (monotonic seconds)."""

    delay: float
    echo: int = 0
    tail: str = ""
    #: When set, every answer is a text of this many bytes, sent in pieces of 64 KiB while
    #: the caller reads; ``sent`` counts the bytes that went out.
    huge: int = 0
    sent: int = 0
    asked: int = 0
    times: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def _handler(state: SlowModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.asked += 1
            state.times.append(time.monotonic())
            state.stop.wait(state.delay)
            lines = asked["messages"][-1]["content"].splitlines()
            said = " ".join(line.split("] ", 1)[-1] for line in lines)  # without their dates
            text = "\n".join([said] * state.echo) + state.tail
            body = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
            if state.huge:
                self._send_huge(state.huge)
                return
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the caller gave up and closed the connection
                return

        def _send_huge(self, size: int) -> None:
            head, end = b'{"choices": [{"message": {"content": "', b'"}}]}'
            piece = b"a" * 65536
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(head) + size + len(end)))
                self.end_headers()
                self.wfile.write(head)
                left = size
                while left > 0:
                    chunk = piece[: min(left, len(piece))]
                    self.wfile.write(chunk)
                    state.sent += len(chunk)
                    left -= len(chunk)
                self.wfile.write(end)
            except OSError:  # the caller stopped reading and closed the connection
                return

        def log_message(self, *args: object) -> None:
            del args

    return Handler


@contextmanager
def slow_model(delay: float, echo: int = 0, tail: str = "", huge: int = 0) -> Iterator[SlowModel]:
    """A :class:`SlowModel` on a loopback port (its ``url`` set) until the block ends."""
    state = SlowModel(delay, echo, tail, huge)
    with loopback(_handler(state), "/v1", state.stop) as state.url:
        yield state


async def recurring(kernel: Kernel, level: AccessLevel, count: int = len(RECURRING)) -> list[UUID]:
    """The first ``count`` of :data:`RECURRING` written at ``level``; their record ids."""
    written = [
        await write(kernel, episode(text, HOURS_APART * n, access_level=level))
        for n, text in enumerate(RECURRING[:count])
    ]
    await kernel.events.settled()
    return written
