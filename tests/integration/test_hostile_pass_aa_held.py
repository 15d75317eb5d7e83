"""Hostile pass AA: probes that held (no fix needed); each docstring states the rule probed."""

from __future__ import annotations

import gzip
import time
import uuid
import zlib
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from typer.testing import CliRunner

from engram.autonomy.levels import LevelBackoff
from engram.infra.llm import MAX_ANSWER_BYTES, LLMUnavailable
from engram.memory.conflict.anchors import named_days, share_a_day
from engram.memory.consolidation.model import BatchReport, ConsolidationReport, SkipReason
from engram.memory.types import AccessLevel, ConsolidationTrigger
from engram.protocols.cli.main import app as cli
from engram.protocols.http.app import create_app
from engram.protocols.http.telemetry import UNMATCHED, route_template
from tests.integration.test_hostile_pass_aa import _answer, _chunked, _complete

_EMPTY = len(_answer(""))


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip, gzip", gzip.compress(gzip.compress(_answer("x")))),
        ("deflate", b"\x78\x9c" + b"not deflate at all" * 4),
        ("gzip", b"\x1f\x8b\x08\x00" + b"\xff" * 64),
        ("gzip", gzip.compress(_answer("x" * (MAX_ANSWER_BYTES - _EMPTY + 1)))),
        ("deflate", b"\x00\x00\x00\xff\xff" * 20_000),  # empty stored blocks, never ending
    ],
    ids=["two codings", "bogus zlib header", "bogus gzip", "one byte past the limit", "empty"],
)
async def test_a_malformed_compressed_answer_is_an_infrastructure_error(
    encoding: str, body: bytes
) -> None:
    """Rule: every bad answer from the summariser is ``LLMUnavailable`` (the piece takes the
    extractive text), never another exception, and nothing past the limit is inflated."""
    with pytest.raises(LLMUnavailable):
        await _complete(_chunked(encoding, [body[:7], body[7:]]))


async def test_a_compressed_answer_exactly_at_the_limit_is_used() -> None:
    """Rule: the limit is the answer's size once decoded, inclusive, however it is split:
    an answer of exactly ``MAX_ANSWER_BYTES`` gzipped and sent a byte at first is used."""
    whole = gzip.compress(_answer("x" * (MAX_ANSWER_BYTES - _EMPTY)))
    pieces = [whole[:1], whole[1:2], whole[2:]]
    assert len(await _complete(_chunked("gzip", pieces))) == MAX_ANSWER_BYTES - _EMPTY
    packed = zlib.compress(_answer("y" * (MAX_ANSWER_BYTES - _EMPTY)))
    answer = _chunked("x-gzip, identity", [gzip.compress(_answer("y" * 10))])
    assert await _complete(answer) == "y" * 10
    assert len(await _complete(_chunked("deflate", [packed]))) == MAX_ANSWER_BYTES - _EMPTY


async def test_a_body_longer_than_its_content_length_is_refused() -> None:
    """Rule: an answer the transport cannot frame is ``LLMUnavailable``."""
    body = _answer("a summary")

    async def answer(writer: Any) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (len(body) - 3) + body)
        await writer.drain()

    with pytest.raises(LLMUnavailable):
        await _complete(answer)


def _report(level: AccessLevel, *, committed: bool) -> ConsolidationReport:
    skipped = {} if committed else {SkipReason.FAILED.value: 2}
    batch = BatchReport(
        uuid.uuid4(),
        (),
        skipped,
        committed=committed,
        trigger=ConsolidationTrigger.EVENT_DRIVEN,
        level=level,
    )
    return ConsolidationReport(
        run_id=batch.batch_id,
        trigger=ConsolidationTrigger.EVENT_DRIVEN,
        dry_run=False,
        candidates=2,
        batches=(batch,),
        skipped=dict(skipped),
        duration_seconds=0.1,
        levels=tuple(AccessLevel),
    )


def test_a_levels_failures_and_successes_move_only_its_own_back_off() -> None:
    """Rule: a more closed level never changes what happens to a more open one. For every
    pair of levels, any run of failures and commits of the more closed one leaves the more
    open one awake at every instant, and its back-off is bounded by the ceiling and ends
    with its first commit."""
    now = datetime(2026, 11, 29, tzinfo=UTC)
    for opened, closed in pairwise(AccessLevel):
        held = LevelBackoff(base=timedelta(seconds=1), ceiling=timedelta(seconds=8))
        for step, committed in enumerate([False] * 6 + [True] + [False] * 3):
            at = now + timedelta(seconds=step)
            held.note(_report(closed, committed=committed), at)
            assert opened in held.awake(AccessLevel, at)
            assert held.until.get(closed, at) - at <= timedelta(seconds=8)
        assert held.failures == {closed: 3}
        assert opened not in held.failures


def test_named_days_read_odd_text_without_error_in_linear_time() -> None:
    """Rule: the conflict rules take any text a record may hold, and stay linear in it."""
    assert named_days("\x00 12 March \ud800") == {(0, 3, 12)}
    for text in ("0 March", "Mayor 12", "12 Mayo", "March 0", "32 March", "2026-02-00"):
        assert named_days(text) == frozenset(), text
    dense = ("1 Jan 12 March Mar 3 2026-03-12 " * 600)[:16000]
    sparse = ("Mayor 12 of Marchland " * 800)[:16000]
    started = time.perf_counter()
    for text in (dense, sparse, "1" * 16000, "March " * 2666):
        named_days(text)
        share_a_day(text, dense, left_on=datetime(2026, 3, 12).date(), right_on=None)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "path",
    [
        "/v1/memories/" + "a" * 10_000,
        "/v1/memories/%00",
        "//v1/memories",
        "/v1/memories/\udc80",
        "/v1/" + "/" * 5_000,
        "/mcp/x/y",
        "/v1/memories/x/../../metrics",
        "*",
        "",
    ],
)
def test_a_route_label_is_a_template_or_unmatched_whatever_the_path(path: str) -> None:
    """Rule: the ``route`` label of the HTTP metrics never carries a raw path (one series
    per path), and nothing the client chose makes it raise: with every method, before
    routing (as when a middleware answers), the label is a template or ``unmatched``."""
    application = create_app()
    templates = {getattr(route, "path", None) for route in application.router.routes}
    templates |= {"/v1/memories/{record_id}", UNMATCHED}
    for method in ("GET", "POST", "BREW", "DELETE"):
        scope = {
            "type": "http",
            "method": method,
            "path": path,
            "app": application,
            "headers": [],
            "query_string": b"",
            "root_path": "",
        }
        label = route_template(scope)
        assert label == UNMATCHED or "{" in label or label in templates, label
        assert label == UNMATCHED or len(label) < 64


@pytest.mark.parametrize("by", ["", "x" * 129, "dana\x1b[31m", "dana\n", "\u200b"], ids=repr)
def test_conflicts_ack_refuses_a_bad_by_before_opening_anything(by: str) -> None:
    """Rule: every bad input gets a typed rejection and changes nothing: ``--by`` of
    ``engram conflicts ack`` is 1-128 printable characters, refused as a usage error (exit
    2) before the kernel is opened (no database is reachable here)."""
    done = CliRunner().invoke(cli, ["conflicts", "ack", "5", "--by", by])
    assert done.exit_code == 2, done.output
    assert "printable" in done.output
