"""The agent process: hosts workers on a driver; serves ``/metrics`` and a guarded control API.

Endpoints (JSON bodies; every one but ``/metrics`` needs ``Authorization: Bearer <token>``):

- ``GET /metrics``       Prometheus text (cumulative counters and a latency histogram)
- ``GET /snapshot``      counters and the latency histogram of the interval since the last call
- ``POST /configure``    ``{broker, pattern, destination, message_size, senders: [...],
  receivers: [...]}``; a sender is ``{producer_id, rate, endpoint, queue, limit, start_delay_s}``
- ``POST /rate``         ``{"rate_per_sender": 115, "active": 8}``: live rate change, no
  reconnect; ``active`` senders (producer ids 1..N) publish, the others pause
- ``POST /consumer_delay`` ``{"seconds": 0.01}``: each receiver's processing time per message
- ``POST /move``         ``{"senders": [ids], "receivers": [ids], "endpoint": url, "queue": q}``
- ``POST /stop_senders`` stop publishing (waits for confirms)
- ``GET /accounting``    per-producer sent counts and received-sequence bitmaps
- ``GET /clock``         the agent host's wall clock in ns (for clock offsets between hosts)
- ``POST /shutdown``     close every connection and exit

The agent exits by itself when its parent dies or ``max_lifetime_s`` passes, so a crashed
controller leaves no agent behind.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from drivers.base import Destination, Driver
from drivers.header import PayloadBuilder
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole
from results.rundir.histogram import bucket_bounds

PROMETHEUS_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                        2.5, 5.0, 10.0)


class Agent:
    """Workers of one agent process and the driver that carries them."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.driver: Driver | None = None
        self.lock = threading.Lock()
        self.senders: dict[int, SenderRole] = {}
        self.receivers: dict[int, ReceiverRole] = {}

    def configure(self, config: dict[str, Any]) -> dict[str, Any]:
        """Create the driver and its workers; receivers connect before senders start."""
        with self.lock:
            if self.driver is not None:
                raise ValueError("agent is already configured")
            destination = Destination(**{**config["destination"],
                                         "endpoints": tuple(config["destination"]["endpoints"])})
            self.driver = _make_driver(config.get("broker", "rabbitmq"), destination,
                                       self.recorder)
            self.driver.start()
            request_reply = config.get("pattern") == "request-reply"
            receiver_kind = ResponderRole if request_reply else ReceiverRole
            for receiver in config.get("receivers", []):
                role = receiver_kind(self.recorder, int(receiver.get("id", 0)))
                self.receivers[role.receiver_id] = role
                self.driver.add_receiver(role, receiver["endpoint"], receiver.get("queue"))
            payload = PayloadBuilder(int(config["message_size"]))
            in_flight = int(config.get("in_flight", 1))
            for sender in config.get("senders", []):
                role = self.driver.call(lambda s=sender: self._sender(
                    s, payload, in_flight if request_reply else None))
                self.senders[role.producer_id] = role
                self.driver.add_sender(role, sender["endpoint"], sender.get("queue"))
        return {"senders": len(config.get("senders", [])),
                "receivers": len(config.get("receivers", []))}

    def _sender(self, sender: dict[str, Any], payload: PayloadBuilder,
                in_flight: int | None) -> SenderRole:
        """A sender (or a requester, given an in-flight window) starting after its random
        start delay."""
        start = time.monotonic() + random.uniform(0, float(sender.get("start_delay_s", 0)))
        limit = sender.get("limit")
        common = (int(sender["producer_id"]), float(sender["rate"]), payload, self.recorder)
        if in_flight is not None:
            return RequesterRole(*common, in_flight=in_flight, now=start, limit=limit)
        return SenderRole(*common, now=start, limit=limit)

    def set_rate(self, rate_per_sender: float, active: int | None = None) -> dict[str, Any]:
        """Apply a new per-sender rate to every sender; with ``active``, only producers 1 to
        ``active`` publish and the others pause."""
        def apply() -> int:
            for role in self.recorder.senders:
                role.set_rate(rate_per_sender)
                role.pause(active is not None and role.producer_id > active)
            return sum(1 for role in self.recorder.senders if not role.paused)
        return {"active": self._on_loop(apply)}

    def set_consumer_delay(self, seconds: float) -> dict[str, Any]:
        """Make every receiver take ``seconds`` per message from now on."""
        if self.driver:
            self.driver.set_consumer_delay(seconds)
        return {"consumer_delay_s": seconds}

    def move(self, body: dict[str, Any]) -> dict[str, Any]:
        """Move senders and receivers (by id) to ``endpoint`` and ``queue``."""
        if self.driver is None:
            raise ValueError("agent is not configured")
        roles = [self.senders[int(i)] for i in body.get("senders", [])] + \
                [self.receivers[int(i)] for i in body.get("receivers", [])]
        for role in roles:
            self.driver.move(role, body["endpoint"], body.get("queue"))
        return {"moved": len(roles)}

    def snapshot(self) -> dict[str, Any]:
        """Counters now and the latency of the interval since the previous snapshot."""
        return self._on_loop(self.recorder.snapshot) or {}

    def accounting(self) -> dict[str, Any]:
        """What each producer sent and which sequence numbers this agent received."""
        def collect() -> dict[str, Any]:
            return {
                "sent": {str(k): v for k, v in self.recorder.sent_per_producer().items()},
                "bitmaps": {str(k): base64.b64encode(v).decode()
                            for k, v in self.recorder.tracker.export().items()},
            }
        return self._on_loop(collect) or {"sent": {}, "bitmaps": {}}

    def stop_senders(self) -> dict[str, Any]:
        """Stop publishing and wait for outstanding confirms."""
        if self.driver:
            self.driver.stop_senders()
        return {"stopped": True}

    def stop_receivers(self) -> dict[str, Any]:
        """Stop consuming; what was in flight is received or back in the queue afterwards."""
        if self.driver:
            self.driver.stop_receivers()
        return {"stopped": True}

    def shutdown(self) -> None:
        """Close everything; the caller exits the process."""
        if self.driver:
            self.driver.stop()

    def _on_loop(self, function):
        return self.driver.call(function) if self.driver else function()


class _Collector:
    """Exposes the agent's last snapshot in Prometheus text format."""

    def __init__(self, agent: Agent):
        self.agent = agent

    def collect(self):
        recorder = self.agent.recorder
        for name, help_text in (("sent", "messages published"), ("confirmed", "publishes "
                                "confirmed"), ("nacked", "publishes nacked"), ("received",
                                "messages received"), ("errors", "errors"), ("reconnects",
                                "reconnect attempts")):
            family = CounterMetricFamily(f"surge_agent_{name}", help_text)
            family.add_metric([], getattr(recorder, name))
            yield family
        gauge = GaugeMetricFamily("surge_agent_connections", "open broker connections")
        gauge.add_metric([], recorder.connections)
        yield gauge
        histogram = recorder.total_latency
        buckets, cumulative = [], 0
        counts = histogram.to_sparse()
        for bound in PROMETHEUS_BUCKETS_S:
            limit_us = bound * 1e6
            cumulative = sum(c for i, c in counts.items() if bucket_bounds(i)[1] <= limit_us)
            buckets.append((str(bound), cumulative))
        buckets.append(("+Inf", histogram.count))
        family = HistogramMetricFamily("surge_agent_latency_seconds",
                                       "end-to-end latency, send to receive")
        family.add_metric([], buckets, histogram.total_us / 1e6)
        yield family


def _make_driver(broker: str, destination: Destination, recorder: Recorder) -> Driver:
    if broker == "rabbitmq":
        from drivers.amqp.driver import AmqpDriver
        return AmqpDriver(destination, recorder)
    if broker == "ibmmq":
        from drivers.mq.driver import MqDriver
        return MqDriver(destination, recorder)
    raise ValueError(f"no driver for broker {broker!r} (known: rabbitmq, ibmmq)")


def _handler(agent: Agent, token: str, registry: CollectorRegistry, done: threading.Event):
    routes = {
        ("GET", "/snapshot"): lambda body: agent.snapshot(),
        ("GET", "/accounting"): lambda body: agent.accounting(),
        ("GET", "/clock"): lambda body: {"ns": time.time_ns()},
        ("POST", "/configure"): agent.configure,
        ("POST", "/rate"): lambda body: agent.set_rate(float(body["rate_per_sender"]),
                                                       body.get("active")),
        ("POST", "/consumer_delay"): lambda body: agent.set_consumer_delay(
            float(body["seconds"])),
        ("POST", "/move"): agent.move,
        ("POST", "/stop_senders"): lambda body: agent.stop_senders(),
        ("POST", "/stop_receivers"): lambda body: agent.stop_receivers(),
        ("POST", "/shutdown"): lambda body: (done.set(), {"shutting_down": True})[1],
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def _route(self, method: str) -> None:
            if method == "GET" and self.path == "/metrics":
                self._send(200, generate_latest(registry), "text/plain; version=0.0.4")
                return
            route = routes.get((method, self.path))
            if route is None:
                self._json(404, {"error": f"no such endpoint: {method} {self.path}"})
                return
            given = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if not hmac.compare_digest(given.encode(), token.encode()):
                self._json(401, {"error": "missing or wrong token"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length)) if length else {}
                self._json(200, route(body))
            except Exception as error:  # noqa: BLE001 - reported to the controller as data
                self._json(500, {"error": f"{type(error).__name__}: {error}"})

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def _send(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    return Handler


def serve(host: str, port: int, token: str, max_lifetime_s: float) -> None:
    """Run an agent until told to shut down, its parent dies, or its lifetime ends.

    Prints one JSON line ``{"port": N, "pid": P}`` on stdout once it listens.
    """
    agent = Agent()
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Collector(agent))
    done = threading.Event()
    server = ThreadingHTTPServer((host, port), _handler(agent, token, registry, done))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="agent-http", daemon=True).start()
    print(json.dumps({"port": server.server_address[1], "pid": os.getpid()}), flush=True)
    parent = os.getppid()
    deadline = time.monotonic() + max_lifetime_s
    while not done.wait(0.5):
        if os.getppid() != parent or time.monotonic() > deadline:
            break
    agent.shutdown()
    server.shutdown()
    sys.stdout.flush()
