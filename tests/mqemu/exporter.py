"""IBM's Prometheus exporter for MQ (mq-metric-samples' ``mq_prometheus``) over an EMULATED
queue manager (tests only; NOT IBM MQ): ``/metrics`` with the ``ibmmq_*`` figures surge reads
(topologies/mq/metrics.py), timed as the real exporter times them.

- Status figures at every scrape, from the queue manager's admin commands: its connection
  count (``DISPLAY QMSTATUS`` CONNS) and each queue's depth (``DISPLAY QLOCAL(*)`` CURDEPTH).
- Resource publications every ``--interval`` seconds (the queue manager's
  ``MonitorPublishHeartBeat``): the CPU of the emulator's process over the interval, user and
  system, as a percentage of the host (from /proc), and each queue's MQPUT/MQPUT1 and
  destructive MQGET counts since the previous publication (``RESET QSTATS``). As the real
  exporter does, a scrape shows only what the publications since the previous scrape said
  (none: no CPU or count figures at all), and ``ibmmq_qmgr_exporter_publications`` says how many
  there were.

Its CPU is the emulator's, a Python process: honest figures of what ran, but not MQ's.

Run: ``python tests/mqemu/exporter.py --qmgr QM1 --qmgr-port 9401 --port 9451 --pid PID
[--host 127.0.0.1] [--interval 10]``; it ends when the queue manager's process does.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.mqemu import admin  # noqa: E402  (run as a script)

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
FIELD = re.compile(r"(\w+)\(([^)]*)\)")


def fields(line: str) -> dict[str, str]:
    """``QUEUE(Q1) CURDEPTH(3)`` -> {"QUEUE": "Q1", "CURDEPTH": "3"}."""
    return dict(FIELD.findall(line))


def cpu_ticks(pid: int) -> tuple[int, int] | None:
    """User and system clock ticks the process has used (None: it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    after = stat[stat.rindex(")") + 2:].split()
    return int(after[11]), int(after[12])  # utime, stime: fields 14 and 15


class Publications:
    """The resource publications made since the last scrape, kept until a scrape takes them."""

    def __init__(self, qmgr: str, host: str, port: int, pid: int, interval_s: float):
        self.qmgr, self.host, self.port, self.pid = qmgr, host, port, pid
        self.interval_s = interval_s
        self.lock = threading.Lock()
        self.pending: list[dict] = []
        self.ticks = cpu_ticks(pid)
        self.at = time.monotonic()

    def publish(self) -> bool:
        """Make one publication (False: the queue manager has ended)."""
        ticks, now = cpu_ticks(self.pid), time.monotonic()
        if ticks is None or self.ticks is None:
            return False
        host = (now - self.at) * TICKS_PER_S * (os.cpu_count() or 1)
        user, system = ((t - p) / host * 100 for t, p in zip(ticks, self.ticks, strict=True))
        self.ticks, self.at = ticks, now
        try:
            lines = admin(self.port, "RESET QSTATS(*)", host=self.host)[0]
        except OSError:
            return False
        queues = {f["QUEUE"]: (int(f["MSGSIN"]), int(f["MSGSOUT"]))
                  for f in map(fields, lines) if "MSGSIN" in f}
        with self.lock:
            self.pending.append({"user": user, "system": system, "queues": queues})
        return True

    def take(self) -> list[dict]:
        """The publications since the previous scrape (the exporter clears them as it reads)."""
        with self.lock:
            taken, self.pending = self.pending, []
        return taken

    def run(self, stop: threading.Event) -> None:
        """Publish every interval until the queue manager ends; then ``stop``."""
        while not stop.wait(self.interval_s):
            if not self.publish():
                stop.set()


def exposition(publications: Publications) -> str:
    """One scrape's text: status figures now, and what the publications since the last
    scrape said."""
    qm = publications.qmgr
    status, queues = admin(publications.port, "DISPLAY QMSTATUS", "DISPLAY QLOCAL(*)",
                           host=publications.host)
    conns = next((int(f["CONNS"]) for f in map(fields, status) if "CONNS" in f), 0)
    lines = [f'ibmmq_qmgr_connection_count{{qmgr="{qm}"}} {conns}']
    for f in map(fields, queues):
        if "CURDEPTH" in f and not f["QUEUE"].startswith("SYSTEM."):
            lines.append(f'ibmmq_queue_depth{{qmgr="{qm}",queue="{f["QUEUE"]}"}} '
                         f'{f["CURDEPTH"]}')
    taken = publications.take()
    lines.append(f'ibmmq_qmgr_exporter_publications{{qmgr="{qm}"}} {len(taken)}')
    if taken:
        last = taken[-1]
        lines += [f'ibmmq_qmgr_user_cpu_time_estimate_for_queue_manager_percentage'
                  f'{{qmgr="{qm}"}} {last["user"]:.3f}',
                  f'ibmmq_qmgr_system_cpu_time_estimate_for_queue_manager_percentage'
                  f'{{qmgr="{qm}"}} {last["system"]:.3f}']
        puts: dict[str, int] = {}
        gets: dict[str, int] = {}
        for publication in taken:
            for queue, (msgs_in, msgs_out) in publication["queues"].items():
                puts[queue] = puts.get(queue, 0) + msgs_in
                gets[queue] = gets.get(queue, 0) + msgs_out
        lines += [f'ibmmq_qmgr_interval_mqput_mqput1_total_count{{qmgr="{qm}"}} '
                  f'{sum(puts.values())}',
                  f'ibmmq_qmgr_interval_destructive_get_total_count{{qmgr="{qm}"}} '
                  f'{sum(gets.values())}']
        for queue in sorted(puts):
            if not queue.startswith("SYSTEM."):
                lines += [f'ibmmq_queue_mqput_mqput1_count{{qmgr="{qm}",queue="{queue}"}} '
                          f'{puts[queue]}',
                          f'ibmmq_queue_mqget_count{{qmgr="{qm}",queue="{queue}"}} '
                          f'{gets[queue]}']
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Serve /metrics until the queue manager's process ends."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qmgr", required=True, help="the queue manager's name")
    parser.add_argument("--qmgr-port", type=int, required=True, help="its listener port")
    parser.add_argument("--pid", type=int, required=True, help="its process")
    parser.add_argument("--port", type=int, required=True, help="port to serve /metrics on")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address of both")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="seconds between resource publications (MonitorPublishHeartBeat)")
    args = parser.parse_args(argv)
    publications = Publications(args.qmgr, args.host, args.qmgr_port, args.pid, args.interval)

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = exposition(publications).encode()
            except OSError:
                self.send_error(503, "queue manager not available")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Metrics)
    server.daemon_threads = True
    stop = threading.Event()
    threading.Thread(target=publications.run, args=(stop,), daemon=True).start()
    threading.Thread(target=lambda: (stop.wait(), server.shutdown()), daemon=True).start()
    print(f"READY exporter {args.qmgr} {args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
