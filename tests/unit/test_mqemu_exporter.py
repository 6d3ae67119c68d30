"""IBM's exporter over an EMULATED queue manager (tests/mqemu/exporter.py; NOT IBM MQ), read by
surge's own exporter reader (topologies/mq/metrics.py): status figures at every scrape, CPU and
MQI counts only from the resource publications since the previous scrape."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.mqemu import HERE, free_port, stop_pid
from topologies.mq.metrics import scrape

pytestmark = pytest.mark.timeout(60)
INTERVAL_S = 0.5


def start_exporter(qmgr, taken: set[int]) -> tuple[subprocess.Popen, int]:
    """The exporter over ``qmgr`` on a free port (another if someone binds it first)."""
    for _ in range(5):
        port = free_port(taken)
        taken.add(port)
        process = subprocess.Popen(
            [sys.executable, str(HERE / "exporter.py"), "--qmgr", "QM1", "--qmgr-port",
             str(qmgr.port), "--pid", str(qmgr.process.pid), "--port", str(port), "--interval",
             str(INTERVAL_S)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if process.stdout.readline().startswith("READY"):
            return process, port
        process.wait(timeout=5)
        process.stdout.close()
    raise RuntimeError("the exporter found no free port")


@pytest.fixture
def exporter(qmgrs):
    qmgr = qmgrs.start("QM1", mqsc=["DEFINE QLOCAL('perf')"])
    process, port = start_exporter(qmgr, {q.port for q in qmgrs.running})
    try:
        yield qmgr, f"http://127.0.0.1:{port}/metrics", process
    finally:
        stop_pid(process.pid, "exporter.py")
        process.wait(timeout=5)
        process.stdout.close()


def put_and_get(ibmmq, qmgr, puts: int, gets: int) -> None:
    qm = ibmmq.QueueManager(None)
    cd = ibmmq.CD(ChannelName=b"APP.SVRCONN", ConnectionName=qmgr.conname.encode())
    qm.connect_with_options("QM1", cd=cd)
    queue = ibmmq.Queue(qm, "perf", ibmmq.CMQC.MQOO_OUTPUT | ibmmq.CMQC.MQOO_INPUT_SHARED)
    for n in range(puts):
        queue.put(f"m{n}".encode())
    for _ in range(gets):
        queue.get()
    queue.close()
    qm.disconnect()


def test_status_at_every_scrape_and_counts_only_from_publications(emulated_ibmmq, exporter):
    qmgr, url, _ = exporter
    first = scrape(url, "QM1")
    assert first.connections == 0 and first.depths == {"perf": 0}
    put_and_get(emulated_ibmmq, qmgr, puts=10, gets=4)
    now = scrape(url, "QM1")
    assert now.depths == {"perf": 6}  # status: at once
    deadline = time.monotonic() + 10
    puts = gets = 0
    cpu = []
    while (puts, gets) != (10, 4) and time.monotonic() < deadline:
        time.sleep(INTERVAL_S)
        reading = scrape(url, "QM1")
        assert reading.published == (reading.publications > 0)
        if reading.published:
            puts += reading.puts.get("perf", 0)
            gets += reading.gets.get("perf", 0)
            cpu.append(reading.cpu_percent_of_host)
            assert reading.qmgr_puts == reading.puts.get("perf", 0)
        else:
            assert reading.cpu_percent_of_host is None and reading.qmgr_puts is None
    assert (puts, gets) == (10, 4)  # each message counted once over the publications
    assert cpu and all(0 <= c <= 100 for c in cpu)


def test_it_ends_with_its_queue_manager(exporter):
    qmgr, url, process = exporter
    qmgr.stop()
    assert process.wait(timeout=10) == 0
    assert scrape(url, "QM1") is None
