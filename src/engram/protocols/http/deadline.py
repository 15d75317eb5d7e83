"""A deadline for receiving a request: the HTTP protocol ``engram serve`` runs uvicorn with.

uvicorn bounds the idle time between two requests of a connection (keep-alive) and nothing
else: a client that opens a connection and sends nothing, stops in the middle of its
headers, or declares a body and trickles it (or never sends it) holds a socket and a file
descriptor for as long as it likes. A few thousand such clients, needing no token, use up the
process's descriptors: every other client is refused, and so are the kernel's own new
connections to PostgreSQL.

:class:`RequestDeadline` gives each request ``seconds`` from its first byte to its last
(headers and body), and a new connection ``seconds`` to send a first byte. A request not
received whole in time is answered ``408`` (a problem document) and its connection closed;
a connection that never began one is closed without an answer. A request received whole has
no deadline while the application works on it, and a keep-alive connection's next request
gets a deadline of its own.

The same class answers a request the parser refuses (a request line that is not HTTP,
headers larger than it buffers) with a ``400 bad-request`` problem document, where uvicorn
answers plain text: every refusal of the server is then a problem document.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar, Literal

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from engram.protocols.http.problems import TYPE_PREFIX

log = structlog.get_logger("engram.http")

Phase = Literal["waiting", "receiving", "answering"]


def _problem_response(status: int, title: str, kind: str, detail: str) -> bytes:
    """A whole HTTP/1.1 answer carrying a problem document, closing the connection."""
    body = json.dumps(
        {"type": TYPE_PREFIX + kind, "title": title, "status": status, "detail": detail}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {title}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class RequestDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline on receiving each request (see the module)."""

    seconds: ClassVar[float] = 30.0
    _timer: asyncio.TimerHandle | None = None
    _phase: Phase = "answering"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """The parser refused the request: a ``400 bad-request`` problem, then close."""
        log.info("http.unparseable_request")
        detail = "the request is not valid HTTP/1.1, or its headers are too large"
        self.transport.write(_problem_response(400, "Bad Request", "bad-request", detail))
        self.transport.close()

    def _phase_now(self) -> Phase:
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.SEND_BODY:
            return "receiving"
        if theirs is h11.IDLE and ours is h11.IDLE:
            # Between requests: bytes h11 holds unparsed are the start of the next one.
            return "receiving" if self.conn.trailing_data[0] else "waiting"
        return "answering"

    def _watch(self) -> None:
        if self.transport.is_closing():
            self._cancel()
            return
        phase = self._phase_now()
        if phase == self._phase:
            return
        self._cancel()
        self._phase = phase
        if phase != "answering":
            self._timer = self.loop.call_later(self.seconds, self._expired)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        cycle: RequestResponseCycle | None = self.cycle  # None before the first request
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started:
                return  # an answer is on its way: the request was read far enough
            # The application waits for the rest of the body: it reads a disconnect, and
            # whatever it answers is dropped.
            cycle.disconnected = True
            cycle.message_event.set()
        log.info("http.request_timeout", phase=self._phase, seconds=self.seconds)
        if self._phase == "receiving":
            detail = f"the request was not received whole within {self.seconds:g} s"
            self.transport.write(
                _problem_response(408, "Request Timeout", "request-timeout", detail)
            )
        self.transport.close()


def request_deadline(seconds: float) -> type[RequestDeadline]:
    """The protocol class for uvicorn's ``http`` setting with ``seconds`` as the deadline."""
    return type("RequestDeadline", (RequestDeadline,), {"seconds": seconds})
