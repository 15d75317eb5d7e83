"""A notification sink that POSTs escalations as JSON to a webhook, with retries.

Retries (tenacity) follow the kernel's policy: up to three more attempts, exponential waits,
only on connection errors, timeouts and 5xx/429 answers; a 4xx answer is final. When the
retries are spent the sink raises :class:`~engram.errors.WebhookUnavailable`, an
infrastructure error, so its caller sends the escalation again later (the body's ``key``
lets the receiver drop a repeat). The kernel's caller is the webhook relay
(``engram.notifications.relay``, migration 0021), which waits between failed sends itself and
builds the sink with no pause; a caller that delivers other work in the same line may set
``pause_seconds``, during which deliveries fail at once without a request.

Each attempt is bounded as a whole by ``timeout_seconds`` (httpx's own timeout bounds each
read, so a receiver sending its answer a byte at a time would hold its caller for ever), and
only the answer's status is read, never its body: whatever the URL reaches cannot grow the
kernel's memory.

A sink keeps one HTTP client for all its deliveries, made on a worker thread at the first
one and closed by :meth:`WebhookSink.aclose`: making a client builds its TLS context, about
45 ms of CPU here, which a client per delivery spent on the event loop for every escalation.
The client keeps no cookies (a receiver's ``Set-Cookie`` would otherwise ride along on every
later delivery and grow without bound), and a delivery that the sink's close cut short is
an infrastructure failure like any other, sent again later, never taken for a refusal.
"""

from __future__ import annotations

import asyncio
import time
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, Protocol

import httpx
import structlog
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from engram.errors import WebhookUnavailable

log = structlog.get_logger("engram.infra.webhook")


class _Escalation(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def payload(self) -> dict[str, Any]: ...

    @property
    def key(self) -> str: ...


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500 or exc.response.status_code == 429
    return isinstance(exc, httpx.TransportError | TimeoutError)


class WebhookSink:
    """POSTs each escalation to ``url``."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        retries: int = 3,
        initial_wait_seconds: float = 1.0,
        timeout_seconds: float = 5.0,
        pause_seconds: float = 30.0,
    ) -> None:
        self._url = url
        self._retries = retries
        self._wait = initial_wait_seconds
        self._timeout = timeout_seconds
        self._pause = pause_seconds
        self._down_until = 0.0
        self._client: httpx.AsyncClient | None = None
        self._making = asyncio.Lock()

    async def _http(self) -> httpx.AsyncClient:
        """The sink's client, made on first use off the event loop."""
        async with self._making:
            if self._client is None:
                self._client = await asyncio.to_thread(
                    httpx.AsyncClient, timeout=self._timeout, cookies=_no_cookies()
                )
            return self._client

    async def aclose(self) -> None:
        """Close the client (a later delivery makes a new one)."""
        async with self._making:
            client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def deliver(self, escalation: _Escalation) -> None:
        if time.monotonic() < self._down_until:
            raise WebhookUnavailable("webhook unavailable: failed moments ago, not tried")
        body = {"kind": escalation.kind, "key": escalation.key, **escalation.payload}
        client = await self._http()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._retries + 1),
                wait=wait_exponential(multiplier=self._wait, max=self._wait * 4),
                retry=retry_if_exception(_retryable),
                reraise=True,
            ):
                with attempt:
                    await self._post(client, body)
        except RuntimeError as exc:
            if not client.is_closed:
                raise
            # closed by aclose() mid-delivery: not the receiver's answer
            raise WebhookUnavailable("webhook unavailable: the sink was closed") from exc
        except (httpx.HTTPError, TimeoutError) as exc:
            if not _retryable(exc):
                raise  # a 4xx: the receiver refused this body, and would again
            self._down_until = time.monotonic() + self._pause
            raise WebhookUnavailable(f"webhook unavailable: {type(exc).__name__}") from exc
        log.info("webhook.delivered", kind=escalation.kind)

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> None:
        """One attempt: the status decides (``HTTPStatusError`` unless 2xx), the body is
        left unread, and the whole exchange ends within the timeout (``TimeoutError``)."""
        async with (
            asyncio.timeout(self._timeout),
            client.stream("POST", self._url, json=body) as response,
        ):
            response.raise_for_status()


def _no_cookies() -> CookieJar:
    """A cookie jar that accepts no cookie from any domain."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def answered_status(exc: BaseException) -> int | None:
    """The receiver's HTTP status behind a failed delivery (None: nothing answered, e.g.
    unreachable), so an operator can tell a redirect, a 404 or a 401 apart; never the URL or
    the body."""
    cause = exc if isinstance(exc, httpx.HTTPStatusError) else exc.__cause__
    return cause.response.status_code if isinstance(cause, httpx.HTTPStatusError) else None
