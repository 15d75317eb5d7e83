"""When jobs are due (engram.autonomy.schedule) and how topics group (consolidation watch)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from engram.autonomy.schedule import Daily, Every, backoff
from engram.memory.consolidation.watch import largest_group

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)
DAY = timedelta(days=1)


def at(year: int, month: int, day: int, *clock: int) -> datetime:
    """An aware UTC instant; ``clock`` is hour, minute, second, microsecond (zero if left out)."""
    hour, minute, second, us = (*clock, 0, 0, 0, 0)[:4]
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


# --- Every -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "boundary"),
    [
        (timedelta(minutes=5), at(2026, 3, 14, 9, 25)),
        (timedelta(hours=1), at(2026, 3, 14, 9)),
        (timedelta(seconds=30), at(2026, 3, 14, 9, 25, 30)),
        (DAY, at(2026, 3, 14)),
    ],
)
def test_every_exactly_on_a_boundary_is_due_then_and_next_one_interval_later(
    interval: timedelta, boundary: datetime
) -> None:
    """On a boundary the latest due instant is that boundary and the next is one interval on."""
    schedule = Every(interval)
    assert boundary == schedule.latest_due(boundary)
    assert boundary + interval == schedule.next_due(boundary)


@pytest.mark.parametrize(
    ("interval", "boundary"),
    [
        (timedelta(minutes=5), at(2026, 3, 14, 9, 25)),
        (timedelta(hours=1), at(2026, 3, 14, 9)),
        (DAY, at(2026, 3, 14)),
    ],
)
def test_every_one_microsecond_before_a_boundary_is_still_in_the_previous_slot(
    interval: timedelta, boundary: datetime
) -> None:
    """One microsecond before a boundary the latest due is the previous boundary and the next
    is the boundary itself; one microsecond after, the boundary is the latest."""
    schedule = Every(interval)
    assert boundary - interval == schedule.latest_due(boundary - US)
    assert boundary == schedule.next_due(boundary - US)
    assert boundary == schedule.latest_due(boundary + US)
    assert boundary + interval == schedule.next_due(boundary + US)


def test_every_counts_from_the_unix_epoch() -> None:
    """Due instants are multiples of the interval since 1970-01-01 UTC, epoch included."""
    schedule = Every(timedelta(minutes=15))
    assert EPOCH == schedule.latest_due(EPOCH)
    assert EPOCH + timedelta(minutes=15) == schedule.next_due(EPOCH)
    assert at(2026, 1, 1, 0, 15) == schedule.latest_due(at(2026, 1, 1, 0, 29, 59, 999_999))


def test_every_with_an_interval_that_does_not_divide_a_day_drifts_across_midnight() -> None:
    """A 7-minute schedule is due on multiples of 7 minutes since the epoch, not at midnight:
    consecutive days start at different offsets, and every due instant is a whole multiple."""
    seven = timedelta(minutes=7)
    schedule = Every(seven)
    midnight = at(2026, 3, 14)
    latest = schedule.latest_due(midnight)
    minutes_since_epoch = int((midnight - EPOCH).total_seconds() // 60)
    assert midnight - timedelta(minutes=minutes_since_epoch % 7) == latest
    assert latest <= midnight < schedule.next_due(midnight)
    assert timedelta(0) == (latest - EPOCH) % seven
    assert timedelta(0) == (schedule.next_due(midnight) - EPOCH) % seven
    offsets = {(schedule.next_due(midnight + n * DAY) - (midnight + n * DAY)) for n in range(7)}
    assert 7 == len(offsets)  # 1440 = 5 (mod 7): each of seven days starts at its own offset


def test_every_with_an_odd_seconds_interval() -> None:
    """An interval of 7 s 500 ms steps exactly, microseconds included."""
    schedule = Every(timedelta(seconds=7, milliseconds=500))
    instant = EPOCH + timedelta(seconds=7.5 * 1_000_000)
    assert instant == schedule.latest_due(instant)
    assert instant == schedule.latest_due(instant + timedelta(seconds=7.5) - US)
    assert instant + timedelta(seconds=7.5) == schedule.next_due(instant)


def test_every_gives_the_same_instants_for_an_instant_in_another_time_zone() -> None:
    """An aware instant in another zone names the same due instants (compared as instants)."""
    schedule = Every(timedelta(hours=1))
    plus_two = timezone(timedelta(hours=2))
    local = datetime(2026, 3, 14, 11, 30, tzinfo=plus_two)  # 09:30 UTC
    assert at(2026, 3, 14, 9) == schedule.latest_due(local)
    assert at(2026, 3, 14, 10) == schedule.next_due(local)


@pytest.mark.parametrize("interval", [timedelta(0), timedelta(seconds=-1), -DAY])
def test_every_refuses_an_interval_that_is_not_positive(interval: timedelta) -> None:
    """A zero or negative interval is a ValueError."""
    with pytest.raises(ValueError, match="positive"):
        Every(interval)


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (timedelta(hours=1), "every 1 h"),
        (timedelta(hours=6), "every 6 h"),
        (DAY, "every 24 h"),
        (timedelta(minutes=5), "every 5 min"),
        (timedelta(minutes=90), "every 90 min"),
        (timedelta(seconds=30), "every 30 s"),
        (timedelta(seconds=90), "every 90 s"),
        (timedelta(seconds=1.5), "every 1.5 s"),
    ],
)
def test_every_describes_itself_in_the_largest_whole_unit(interval: timedelta, text: str) -> None:
    """Hours when whole, else minutes when whole, else seconds."""
    assert text == Every(interval).describe()


# --- Daily -------------------------------------------------------------------------------


def test_daily_after_the_time_of_day_is_due_today_and_next_tomorrow() -> None:
    """At 10:00 a 03:00 schedule was due at 03:00 today and is next due at 03:00 tomorrow."""
    schedule = Daily(3)
    now = at(2026, 3, 14, 10)
    assert at(2026, 3, 14, 3) == schedule.latest_due(now)
    assert at(2026, 3, 15, 3) == schedule.next_due(now)


def test_daily_before_the_time_of_day_was_due_yesterday_and_next_today() -> None:
    """At 02:59 a 03:00 schedule was last due yesterday and is next due today."""
    schedule = Daily(3)
    now = at(2026, 3, 14, 2, 59)
    assert at(2026, 3, 13, 3) == schedule.latest_due(now)
    assert at(2026, 3, 14, 3) == schedule.next_due(now)


def test_daily_exactly_at_and_just_before_the_time_of_day() -> None:
    """Exactly at 04:30 it is due now; one microsecond before, it was due the day before."""
    schedule = Daily(4, 30)
    moment = at(2026, 3, 14, 4, 30)
    assert moment == schedule.latest_due(moment)
    assert moment + DAY == schedule.next_due(moment)
    assert moment - DAY == schedule.latest_due(moment - US)
    assert moment == schedule.next_due(moment - US)


@pytest.mark.parametrize(
    ("now", "latest", "following"),
    [
        # Before the time of day on the first of a month: due on the last day of the previous.
        (at(2026, 3, 1, 1), at(2026, 2, 28, 3), at(2026, 3, 1, 3)),
        (at(2028, 3, 1, 1), at(2028, 2, 29, 3), at(2028, 3, 1, 3)),  # leap year
        (at(2026, 5, 1, 2, 59, 59), at(2026, 4, 30, 3), at(2026, 5, 1, 3)),
        (at(2027, 1, 1, 0, 0), at(2026, 12, 31, 3), at(2027, 1, 1, 3)),  # across a year end
        # After it on the last day of a month: next due on the first of the next.
        (at(2026, 1, 31, 23, 59), at(2026, 1, 31, 3), at(2026, 2, 1, 3)),
        (at(2026, 12, 31, 12), at(2026, 12, 31, 3), at(2027, 1, 1, 3)),
    ],
)
def test_daily_across_a_month_end(now: datetime, latest: datetime, following: datetime) -> None:
    """Month, leap-day and year ends are crossed by whole days."""
    schedule = Daily(3)
    assert latest == schedule.latest_due(now)
    assert following == schedule.next_due(now)


def test_daily_at_midnight_and_at_the_last_minute_of_the_day() -> None:
    """00:00 and 23:59 are valid times of day at both ends of the day."""
    assert at(2026, 3, 14) == Daily(0).latest_due(at(2026, 3, 14, 0, 0, 0, 1))
    assert at(2026, 3, 13) == Daily(0).latest_due(at(2026, 3, 14) - US)
    assert at(2026, 3, 13, 23, 59) == Daily(23, 59).latest_due(at(2026, 3, 14, 23, 58))
    assert at(2026, 3, 14, 23, 59) == Daily(23, 59).next_due(at(2026, 3, 14, 23, 58))


def test_daily_reads_the_time_of_day_in_utc_whatever_the_zone_of_now() -> None:
    """At 01:00 +02:00 (23:00 UTC the day before) a 03:00 UTC schedule is next due at 03:00 UTC
    of the UTC day that follows."""
    plus_two = timezone(timedelta(hours=2))
    now = datetime(2026, 3, 15, 1, 0, tzinfo=plus_two)  # 2026-03-14 23:00 UTC
    schedule = Daily(3)
    assert at(2026, 3, 14, 3) == schedule.latest_due(now)
    assert at(2026, 3, 15, 3) == schedule.next_due(now)


@pytest.mark.parametrize(("hour", "minute"), [(24, 0), (-1, 0), (3, 60), (3, -1), (25, 61)])
def test_daily_refuses_a_time_of_day_that_does_not_exist(hour: int, minute: int) -> None:
    """Hours outside 0-23 or minutes outside 0-59 are a ValueError naming the time."""
    with pytest.raises(ValueError, match="no such time of day"):
        Daily(hour, minute)


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (Daily(3), "daily at 03:00 UTC"),
        (Daily(4, 30), "daily at 04:30 UTC"),
        (Daily(0), "daily at 00:00 UTC"),
        (Daily(23, 59), "daily at 23:59 UTC"),
    ],
)
def test_daily_describes_itself_with_a_zero_padded_utc_time(schedule: Daily, text: str) -> None:
    """HH:MM UTC, zero-padded."""
    assert text == schedule.describe()


# --- backoff -----------------------------------------------------------------------------


def test_backoff_starts_at_base_and_doubles_with_each_failure() -> None:
    """1, 2, 3, 4 failures wait base, 2x, 4x, 8x."""
    base, ceiling = timedelta(seconds=30), timedelta(hours=6)
    waits = [backoff(n, base=base, ceiling=ceiling) for n in range(1, 5)]
    assert [base, 2 * base, 4 * base, 8 * base] == waits


def test_backoff_never_exceeds_its_ceiling() -> None:
    """Past the ceiling every wait is the ceiling, however many failures (huge counts too)."""
    base, ceiling = timedelta(minutes=1), timedelta(minutes=10)
    assert timedelta(minutes=8) == backoff(4, base=base, ceiling=ceiling)
    assert ceiling == backoff(5, base=base, ceiling=ceiling)
    assert ceiling == backoff(100, base=base, ceiling=ceiling)
    assert ceiling == backoff(10**9, base=base, ceiling=ceiling)


def test_backoff_is_monotonic_in_the_number_of_failures() -> None:
    """More failures never wait less."""
    base, ceiling = timedelta(seconds=1), timedelta(days=1)
    waits = [backoff(n, base=base, ceiling=ceiling) for n in range(40)]
    assert waits == sorted(waits)
    assert ceiling == waits[-1]


@pytest.mark.parametrize("failures", [0, -1, -100])
def test_backoff_without_failures_waits_nothing(failures: int) -> None:
    """Fewer than one failure: no wait at all."""
    assert timedelta(0) == backoff(
        failures, base=timedelta(minutes=1), ceiling=timedelta(minutes=10)
    )


def test_backoff_with_a_ceiling_below_base_waits_the_ceiling() -> None:
    """The ceiling wins even over the first wait."""
    assert timedelta(seconds=5) == backoff(
        1, base=timedelta(seconds=30), ceiling=timedelta(seconds=5)
    )


# --- largest_group -----------------------------------------------------------------------


def ids(n: int) -> list[uuid.UUID]:
    """``n`` distinct ids."""
    return [uuid.uuid4() for _ in range(n)]


def test_largest_group_of_nothing_is_zero() -> None:
    """No pairs, no group."""
    assert 0 == largest_group([])


def test_largest_group_of_self_pairs_is_one() -> None:
    """A record paired with itself (a fresh record without links) is a group of one."""
    a, b, c = ids(3)
    assert 1 == largest_group([(a, a)])
    assert 1 == largest_group([(a, a), (b, b), (c, c)])
    assert 1 == largest_group([(a, a), (a, a)])


def test_largest_group_of_a_chain_is_its_length() -> None:
    """a-b, b-c, ..., in any order and direction, is one group of all."""
    nodes = ids(10)
    chain = list(itertools.pairwise(nodes))
    assert 10 == largest_group(chain)
    assert 10 == largest_group(list(reversed(chain)))
    assert 10 == largest_group([(b, a) for a, b in chain])
    shuffled = chain[::2] + chain[1::2]
    assert 10 == largest_group(shuffled)


def test_largest_group_of_a_star_is_its_centre_and_leaves() -> None:
    """A centre linked to five leaves is a group of six, whichever side the centre is on."""
    centre, *leaves = ids(6)
    assert 6 == largest_group([(centre, leaf) for leaf in leaves])
    assert 6 == largest_group([(leaf, centre) for leaf in leaves])


def test_largest_group_of_disconnected_pairs_is_two() -> None:
    """Pairs that share nothing stay apart."""
    nodes = ids(8)
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, 8, 2)]
    assert 2 == largest_group(pairs)


def test_largest_group_picks_the_largest_of_several() -> None:
    """A triangle, a chain of four, a pair and loners: the chain of four is the largest; a
    bridge between the triangle and the chain makes one group of seven."""
    t = ids(3)
    c = ids(4)
    p = ids(2)
    loners = ids(3)
    triangle = [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])]
    chain = [(c[0], c[1]), (c[1], c[2]), (c[2], c[3])]
    pairs = [*triangle, *chain, (p[0], p[1]), *[(x, x) for x in loners]]
    assert 4 == largest_group(pairs)
    assert 7 == largest_group([*pairs, (t[1], c[3])])


def test_largest_group_counts_repeated_edges_and_cycles_once() -> None:
    """Duplicated edges and cycles add no members."""
    a, b, c = ids(3)
    assert 3 == largest_group([(a, b), (b, a), (a, b), (b, c), (c, a), (c, c)])
