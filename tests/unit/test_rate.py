import random

import pytest

from drivers.rate import UNLIMITED_BATCH, RateSchedule, on_tick, unlimited_batch


def run(schedule, times):
    """Call due() at each time and return the total handed out."""
    return sum(schedule.due(t) for t in times)


def irregular_times(start, end, max_gap, seed):
    rng = random.Random(seed)
    t = start
    times = []
    while t < end:
        t = min(end, t + rng.uniform(0, max_gap))
        times.append(t)
    return times


@pytest.mark.parametrize(
    ("rate", "duration", "max_gap", "expected"),
    [
        (100, 10.0, 0.05, 1000),
        (100, 10.0, 0.5, 1000),
        (1000, 3.0, 0.003, 3000),
        (7, 13.0, 0.9, 91),
        (0.5, 10.0, 0.3, 5),
    ],
)
def test_irregular_polling_hits_the_schedule(rate, duration, max_gap, expected):
    s = RateSchedule(rate, now=50.0)
    total = s.due(50.0) + run(s, irregular_times(50.0, 50.0 + duration, max_gap, seed=rate))
    assert abs(total - expected) <= 1
    assert s.handed_out == total
    assert s.skipped == 0


def test_first_message_is_due_immediately():
    s = RateSchedule(10, now=5.0)
    assert s.next_due() == 5.0
    assert s.due(5.0) == 1
    assert s.due(5.0) == 0
    assert s.next_due() == pytest.approx(5.1)
    assert s.due(5.0999) == 0
    assert s.due(5.1) == 1


def test_no_drift_over_an_hour():
    s = RateSchedule(1, now=0.0)
    total = run(s, (i * 0.1 for i in range(36_001)))
    assert abs(total - 3600) <= 1
    assert s.skipped == 0


def test_no_drift_at_epoch_scale_times():
    start = 1_700_000_000.0
    s = RateSchedule(1000, now=start)
    total = run(s, (start + i * 0.0007 for i in range(85_715)))
    assert abs(total - 60_000) <= 1
    assert s.skipped == 0


def test_stall_is_capped_and_skipped():
    s = RateSchedule(100, now=0.0, max_catchup_s=1.0)
    assert s.due(0.0) == 1
    burst = s.due(5.0)
    assert burst <= 100
    assert burst == 100
    assert abs(s.skipped - 400) <= 1
    # Back on the original grid afterwards: no further burst, no lag.
    assert s.due(5.0) == 0
    assert abs(s.due(5.5) - 50) <= 1
    assert s.skipped == pytest.approx(400, abs=1)
    assert s.handed_out + s.skipped == pytest.approx(551, abs=1)


@pytest.mark.parametrize(
    ("rate", "catchup", "stall", "burst", "skipped"),
    [
        (100, 1.0, 0.99, 99, 0),
        (100, 0.5, 2.0, 50, 150),
        (10, 2.0, 10.0, 20, 80),
        (0.5, 1.0, 10.0, 1, 4),
    ],
)
def test_catchup_limit_table(rate, catchup, stall, burst, skipped):
    s = RateSchedule(rate, now=0.0, max_catchup_s=catchup)
    s.due(0.0)
    assert s.due(stall) == burst
    assert s.skipped == skipped


def test_set_rate_sums_the_two_segments():
    s = RateSchedule(10, now=0.0)
    total = s.due(0.0) + run(s, irregular_times(0.0, 5.0, 0.05, seed=1))
    s.set_rate(50, now=5.0)
    total += run(s, irregular_times(5.0, 10.0, 0.05, seed=2))
    assert abs(total - (10 * 5 + 50 * 5 + 1)) <= 1
    assert s.rate == 50
    assert s.skipped == 0


def test_set_rate_up_has_no_burst_and_no_gap():
    s = RateSchedule(1, now=0.0)
    assert s.due(0.0) == 1
    s.set_rate(10, now=0.5)
    assert s.due(0.5) == 0
    # Half the old interval remained; at 10 msg/s that is 0.05 s.
    assert s.next_due() == pytest.approx(0.55)
    assert s.due(0.55) == 1
    assert s.due(0.65) == 1


def test_set_rate_down_has_no_burst():
    s = RateSchedule(100, now=0.0)
    s.due(0.0)
    s.set_rate(1, now=0.005)
    assert s.next_due() == pytest.approx(0.505)
    assert s.due(0.5) == 0
    assert s.due(0.505) == 1


def test_set_rate_keeps_pending_messages():
    s = RateSchedule(10, now=0.0)
    assert s.due(0.0) == 1
    s.set_rate(20, now=0.55)
    assert s.due(0.55) == 5
    assert s.handed_out == 6


def test_unlimited():
    s = RateSchedule(0, now=0.0)
    assert s.due(0.0) == UNLIMITED_BATCH
    assert s.due(0.0) == UNLIMITED_BATCH
    assert s.handed_out == 2 * UNLIMITED_BATCH
    assert s.next_due() == 0.0


def test_switch_between_limited_and_unlimited():
    s = RateSchedule(0, now=0.0)
    s.due(0.0)
    s.set_rate(2, now=10.0)
    assert s.next_due() == 10.0
    assert run(s, [10.0, 10.25, 10.5, 11.0]) == 3
    s.set_rate(0, now=11.0)
    assert s.due(11.0) == UNLIMITED_BATCH


def test_fractional_rate():
    s = RateSchedule(0.5, now=100.0)
    assert s.due(100.0) == 1
    assert s.next_due() == pytest.approx(102.0)
    assert s.due(101.9) == 0
    assert s.due(102.0) == 1
    assert run(s, [102.5 + 0.5 * i for i in range(16)]) == 4


@pytest.mark.parametrize(
    ("rate", "catchup"), [(-1, 1.0), (float("nan"), 1.0), (float("inf"), 1.0), (1, 0), (1, -1)]
)
def test_rejects_bad_arguments(rate, catchup):
    with pytest.raises(ValueError):
        RateSchedule(rate, now=0.0, max_catchup_s=catchup)


def test_set_rate_rejects_negative():
    s = RateSchedule(1, now=0.0)
    with pytest.raises(ValueError):
        s.set_rate(-5, now=1.0)


@pytest.mark.parametrize("size, batch", [(28, 64), (2048, 64), (64 * 1024, 16),
                                         (300 * 1024, 3), (1 << 20, 1), (4 << 20, 1)])
def test_unlimited_batches_of_large_messages_stay_within_1_mib(size, batch):
    assert unlimited_batch(size) == batch
    s = RateSchedule(0, now=0.0, batch=unlimited_batch(size))
    assert s.due(0.0) == batch


@pytest.mark.parametrize("delay, now, expected", [
    (0.0, 10.0005, 10.002),   # due now: the next tick, never this instant again
    (0.0, 10.002, 10.004),    # on a tick: the next one
    (0.0025, 10.0005, 10.004),  # due between ticks: the tick after it
    (0.0035, 10.0005, 10.004),  # due on a tick: that tick
    (1.0, 10.0, 11.0),
])
def test_wake_ups_fall_on_whole_ticks_after_now_and_not_before_the_delay(delay, now, expected):
    woken = now + on_tick(delay, now, 0.002)
    assert woken == pytest.approx(expected, abs=1e-9)
    assert woken >= now + delay - 1e-9 and woken > now


def test_senders_due_at_different_instants_within_a_tick_wake_together():
    wakes = {round(now + on_tick(0.0, now, 0.002), 9) for now in (5.0001, 5.0007, 5.0013, 5.0019)}
    assert wakes == {5.002}
