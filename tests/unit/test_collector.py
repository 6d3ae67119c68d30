"""Concurrent reads with a deadline: a slow source is missing, never waited for twice."""

import threading
import time

from orchestrator.run.collector import Collector, Failed


def test_slow_source_misses_the_deadline_and_arrives_later():
    release = threading.Event()
    calls = {"slow": 0}

    def slow():
        calls["slow"] += 1
        release.wait(10)
        return "late reading"

    collector = Collector({"fast": lambda: 1, "slow": slow, "broken": lambda: 1 / 0})
    collector.start()
    _until(lambda: collector.busy() == ["slow"])
    first = collector.collect(deadline=0.0)  # already past: take what is done, wait for none
    assert first["fast"] == 1 and "slow" not in first
    assert isinstance(first["broken"], Failed) and "ZeroDivisionError" in first["broken"].error
    release.set()
    _until(lambda: not collector.busy())  # the late read ends on its own; none new started
    second = collector.collect(deadline=0.0)
    assert second["slow"] == "late reading" and calls["slow"] == 1
    collector.close()


def test_everything_in_time_is_collected():
    clock = iter([0.0, 0.0, 0.0, 0.0, 5.0])
    collector = Collector({name: (lambda n=name: n) for name in "abc"},
                          clock=lambda: next(clock, 5.0))
    assert collector.collect(deadline=1.0) == {"a": "a", "b": "b", "c": "c"}
    collector.close()


def test_collect_returns_once_every_read_is_in_not_at_the_deadline():
    gate = threading.Event()
    sources = {f"agent:{i}": (lambda i=i: gate.wait(10) and i) for i in range(50)}
    collector = Collector(sources)
    collector.start()
    gate.set()
    started = time.monotonic()
    assert collector.collect(deadline=started + 30.0) == {name: i for i, name in
                                                          enumerate(sources)}
    assert time.monotonic() - started < 10.0  # long before the deadline
    collector.close()


def _until(condition, tries: int = 500) -> None:
    for _ in range(tries):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("condition never held")
