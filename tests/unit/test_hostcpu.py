"""Broker hosts' CPU from /proc/stat over SSH: parsed from the command's output, and read in
the background so a slow answer never holds up a tick."""

import threading

import pytest

from topologies.base import CpuReading
from topologies.hostcpu import LatestReadings, parse_host_cpu


def test_busy_and_total_seconds_of_the_whole_host_at_its_uptime():
    reading, ticks, at = parse_host_cpu(["100", "5000.5",
                                         "cpu  400 0 100 1000 500 0 0 0 0 0", "ignored"])
    assert (ticks, at) == (100, 5000.5)
    assert reading == CpuReading(5.0, 5000.5, 20.0)  # idle and iowait are not busy
    with pytest.raises((ValueError, IndexError)):
        parse_host_cpu(["100", "no uptime"])


def test_latest_readings_never_wait_and_read_one_at_a_time():
    gates = [threading.Event() for _ in range(3)]  # each read waits for its own
    calls = []

    def read():
        calls.append(1)
        gates[len(calls) - 1].wait(5)
        return {"h1": CpuReading(float(len(calls)), 1.0, 2.0)}
    latest = LatestReadings(read)
    assert latest.latest() == {}  # the first read is under way
    assert latest.latest() == {} and len(calls) == 1  # not a second one meanwhile
    gates[0].set()
    latest._thread.join(5)
    assert latest.latest() == {"h1": CpuReading(1.0, 1.0, 2.0)}  # and the next one starts
    gates[1].set()
    latest._thread.join(5)
    assert len(calls) == 2 and latest.latest()["h1"].seconds == 2.0
    gates[2].set()  # the third, started by that call
    latest._thread.join(5)
