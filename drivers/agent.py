"""The agent process: hosts workers on a driver; serves ``/metrics`` and a guarded control API.

The API's messages, paths and version are declared in :mod:`drivers.protocol`; this module only
carries them out. The agent exits by itself when its parent dies or ``max_lifetime_s`` passes,
so a crashed controller leaves no agent behind. Load hosts start it as ``surge agent``; a run
starts its local agents as ``python -m drivers.agent`` (:func:`main`), the same agent without
the command line's own start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import random
import sys
import threading
import time
from typing import Any

from drivers import protocol
from drivers.base import Driver
from drivers.http import IDLE_TIMEOUT_S, MAX_CONNECTIONS, GuardedServer, HttpError, JsonHandler
from drivers.message import Bodies, PayloadBuilder
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole


class Agent:
    """Workers of one agent process and the driver that carries them."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.driver: Driver | None = None
        self.lock = threading.Lock()
        self.senders: dict[int, SenderRole] = {}
        self.receivers: dict[int, ReceiverRole] = {}
        self.waiting: dict[int, tuple[ReceiverRole, protocol.ReceiverConfig]] = {}  # by id,
        # receivers a later Rate starts
        self.bodies: Bodies | None = None  # the run's message bodies, once configured
        self.labels: dict[str, str] = {}  # of its /metrics: run_id, scenario, agent

    def configure(self, config: protocol.Configure) -> protocol.Configured:
        """Create the driver and its workers; receivers connect before senders start."""
        with self.lock:
            if self.driver is not None:
                raise ValueError("agent is already configured")
            self.driver = _make_driver(config, self.recorder)
            self.labels = dict(config.labels)
            self.driver.start()
            request_reply = config.pattern == "request-reply"
            receiver_kind = ResponderRole if request_reply else ReceiverRole
            for receiver in config.receivers:
                role = receiver_kind(self.recorder, receiver.id, receiver.group,
                                     stream=config.destination.stream_offset is not None)
                self.receivers[role.receiver_id] = role
                self.waiting[role.receiver_id] = (role, receiver)
            self._start_receivers(config.receivers_started)
            self.bodies = Bodies(config.message)
            payload = PayloadBuilder(self.bodies)
            for sender in config.senders:
                role = self.driver.call(lambda s=sender: self._sender(
                    s, payload, config.in_flight if request_reply else None,
                    config.senders_paused))
                role.queues = queue_names(sender.queue or config.destination.queue)
                self.senders[role.producer_id] = role
                self.driver.add_sender(role, sender.endpoint, sender.queue)
        return protocol.Configured(len(config.senders), len(config.receivers))

    def _sender(self, sender: protocol.SenderConfig, payload: PayloadBuilder,
                in_flight: int | None, paused: bool) -> SenderRole:
        """A sender (or a requester, given an in-flight window) starting after its random
        start delay (or, ``paused``, at the first rate the controller sends)."""
        start = time.monotonic() + random.uniform(0, sender.start_delay_s)
        limit = sender.limit
        common = (sender.producer_id, sender.rate, payload, self.recorder)
        role = RequesterRole(*common, in_flight=in_flight, now=start, limit=limit) \
            if in_flight is not None else SenderRole(*common, now=start, limit=limit)
        role.pause(paused)
        return role

    def _start_receivers(self, upto: int | None) -> None:
        """Connect the waiting receivers numbered up to ``upto`` (``None``: all)."""
        for receiver_id in sorted(self.waiting):
            if upto is None or receiver_id <= upto:
                role, receiver = self.waiting.pop(receiver_id)
                self.driver.add_receiver(role, receiver.endpoint, receiver.queue,
                                         receiver.start_delay_s)

    def set_rate(self, rate: protocol.Rate) -> protocol.RateApplied:
        """Apply a new per-sender rate to every sender; with ``active``, only producers 1 to
        ``active`` publish and the others pause; receivers up to ``receivers`` start if they
        wait."""
        if rate.receivers is not None and self.waiting:
            with self.lock:
                self._start_receivers(rate.receivers)
        def apply() -> int:
            if self.bodies is not None and rate.size_class != self.bodies.current:
                self.bodies.set_class(rate.size_class)
            for role in self.recorder.senders:
                role.set_rate(rate.rate_per_sender)
                role.pause(rate.active is not None and role.producer_id > rate.active)
            if self.driver:
                self.driver.wake_senders()
            return sum(1 for role in self.recorder.senders if not role.paused)
        return protocol.RateApplied(self._on_loop(apply))

    def set_consumer_delay(self, delay: protocol.ConsumerDelay) -> protocol.Done:
        """Make every receiver take ``seconds`` per message from now on."""
        if self.driver:
            self.driver.set_consumer_delay(delay.seconds, delay.paused)
        return protocol.Done()

    def move(self, move: protocol.Move) -> protocol.Moved:
        """Move senders and receivers (by id) to ``endpoint`` and ``queue``."""
        if self.driver is None:
            raise ValueError("agent is not configured")
        roles = [self.senders[i] for i in move.senders] + \
                [self.receivers[i] for i in move.receivers]
        for role in roles:
            waiting = self.waiting.get(getattr(role, "receiver_id", None))
            if waiting is not None:  # not started: it will start where it was moved
                self.waiting[role.receiver_id] = (role, dataclasses.replace(
                    waiting[1], endpoint=move.endpoint, queue=move.queue or waiting[1].queue))
                continue
            if move.queue and isinstance(role, ReceiverRole):
                self._on_loop(lambda r=role: r.moved_to(move.queue))
            elif move.queue:
                role.queues = queue_names(move.queue)
            self.driver.move(role, move.endpoint, move.queue)
        return protocol.Moved(len(roles))

    def snapshot(self) -> protocol.Snapshot:
        """Counters now and the latency of the interval since the previous snapshot."""
        return self._on_loop(self.recorder.snapshot)

    def accounting(self) -> protocol.Accounting:
        """What each producer sent and which sequence numbers this agent received."""
        return self._on_loop(lambda: protocol.Accounting(self.recorder.sent_per_producer(),
                                                         self.recorder.exports()))

    def stop_senders(self) -> protocol.Done:
        """Stop publishing and wait for outstanding confirms."""
        if self.driver:
            self.driver.stop_senders()
        return protocol.Done()

    def stop_receivers(self) -> protocol.Done:
        """Stop consuming; what was in flight is received or back in the queue afterwards."""
        if self.driver:
            self.driver.stop_receivers()
        return protocol.Done()

    def shutdown(self) -> None:
        """Close everything; the caller exits the process."""
        if self.driver:
            self.driver.stop()

    def _on_loop(self, function):
        return self.driver.call(function) if self.driver else function()


class _Metrics:
    """The agent's ``/metrics``, made on the first scrape: prometheus_client is loaded then,
    not before the agent's first line (a twentieth of a second of every agent's start)."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self._registry = None
        self._lock = threading.Lock()

    def text(self) -> bytes:
        """The agent's figures in Prometheus text format."""
        from prometheus_client import CollectorRegistry, generate_latest
        with self._lock:
            if self._registry is None:
                self._registry = CollectorRegistry(auto_describe=True)
                self._registry.register(_Collector(self.agent))
        return generate_latest(self._registry)


class _Collector:
    """Exposes the agent's counters and latency in Prometheus text format, labelled with the
    run, scenario and agent the controller named at configure time."""

    def __init__(self, agent: Agent):
        self.agent = agent

    def collect(self):
        from drivers.metrics import counter_family, gauge_family, histogram_family
        recorder, labels = self.agent.recorder, self.agent.labels
        for name, help_text in (("sent", "messages published"), ("confirmed", "publishes "
                                "confirmed"), ("nacked", "messages nacked, each once"), ("received",
                                "messages received"), ("errors", "errors"), ("reconnects",
                                "reconnect attempts")):
            yield counter_family(f"surge_agent_{name}", help_text, getattr(recorder, name),
                                 labels)
        yield gauge_family("surge_agent_connections", "open broker connections",
                           recorder.connections, labels)
        yield histogram_family("surge_agent_latency_seconds",
                               "end-to-end latency, send to receive", recorder.total_latency,
                               labels)
        yield histogram_family("surge_agent_intended_latency_seconds",
                               "end-to-end latency from the intended send time to receive "
                               "(rate-limited senders only)", recorder.total_intended_latency,
                               labels)
        yield histogram_family("surge_agent_confirm_latency_seconds",
                               "publisher-confirm latency, publish to the broker's confirm "
                               "(senders with confirms only)", recorder.total_confirm_latency,
                               labels)


# broker -> the module of its driver, which makes one with ``driver_for(config, recorder)``
DRIVERS = {"rabbitmq": "drivers.amqp.driver", "ibmmq": "drivers.mq.driver"}


def _make_driver(config: protocol.Configure, recorder: Recorder) -> Driver:
    """The driver of the run's broker, given its destination, messages and the driver's own
    settings."""
    module = DRIVERS.get(config.broker)
    if module is None:
        raise ValueError(f"no driver for broker {config.broker!r} (known: "
                         f"{', '.join(DRIVERS)})")
    return importlib.import_module(module).driver_for(config, recorder)


def preload(broker: str) -> None:
    """Load ``broker``'s driver now: a local agent does it after its first line, while the
    controller prepares, rather than on the way to the first publish. One that does not load
    is left for ``/configure`` to report."""
    with contextlib.suppress(Exception):  # an unknown broker too
        importlib.import_module(DRIVERS[broker])


def _handler(agent: Agent, token: str, metrics: _Metrics, done: threading.Event,
             hello: protocol.Hello):
    def shutdown(_: None) -> protocol.Done:
        return protocol.Done()  # the agent stops once this reply is written (see _route)

    # path -> (method, request message or None, what the agent does)
    routes: dict[str, tuple[str, type | None, Any]] = {
        "/configure": ("POST", protocol.Configure, agent.configure),
        "/rate": ("POST", protocol.Rate, agent.set_rate),
        "/consumer_delay": ("POST", protocol.ConsumerDelay, agent.set_consumer_delay),
        "/move": ("POST", protocol.Move, agent.move),
        "/snapshot": ("GET", None, lambda _: agent.snapshot()),
        "/accounting": ("GET", None, lambda _: agent.accounting()),
        "/clock": ("GET", None, lambda _: protocol.Clock(time.time_ns())),
        "/hello": ("GET", None, lambda _: hello),
        "/stop_senders": ("POST", None, lambda _: agent.stop_senders()),
        "/stop_receivers": ("POST", None, lambda _: agent.stop_receivers()),
        "/shutdown": ("POST", None, shutdown),
    }

    class Handler(JsonHandler):
        max_body_bytes = protocol.MAX_MESSAGE_BYTES

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def _route(self, method: str) -> None:
            if method == "GET" and self.path == "/metrics":
                self.reply(200, metrics.text(), "text/plain; version=0.0.4")
                return
            route = routes.get(self.path)
            if route is None or route[0] != method:
                self.reply_json(404, {"error": f"no such endpoint: {method} {self.path}"})
                return
            if not self.authorized(token):
                self.reply_json(401, {"error": "missing or wrong token (Authorization: Bearer "
                                               "<token>)"})
                return
            _, request, act = route
            try:
                body = self.read_body(required=request is not None)
                message = protocol.decode(request, json.loads(body)) if request else None
            except HttpError as error:
                self.reply_json(error.status, {"error": error.message})
                return
            except (ValueError, RecursionError, protocol.ProtocolError) as error:
                self.reply_json(400, {"error": f"bad request: {error}"})
                return
            try:
                self.reply_json(200, protocol.encode(act(message)))
            except Exception as error:  # noqa: BLE001 - reported to the controller as data
                self.reply_json(500, {"error": f"{type(error).__name__}: {error}"})
            if self.path == "/shutdown":
                self.wfile.flush()
                done.set()

    return Handler


def serve(host: str, port: int, token: str, max_lifetime_s: float, *,
          idle_timeout_s: float = IDLE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
          broker: str | None = None) -> None:
    """Run an agent until told to shut down, its parent dies, or its lifetime ends.

    Prints one :class:`~drivers.protocol.Hello` JSON line on stdout once it listens. Only a
    request with ``token`` gets a connection kept alive, closed when idle for
    ``idle_timeout_s``; beyond ``max_connections`` of those at once, one more is answered 503.
    Anything else (``/metrics``) is served in a small pool of its own, so that connections
    from strangers cannot take the controller's (see :class:`~drivers.http.GuardedServer`).
    ``broker``: the driver to load (:func:`preload`) once that line is out.
    """
    agent = Agent()
    done = threading.Event()
    server = GuardedServer((host, port), JsonHandler, token=token,
                           idle_timeout_s=idle_timeout_s, max_connections=max_connections)
    hello = protocol.Hello(server.server_address[1], os.getpid(), protocol.PROTOCOL_VERSION)
    server.RequestHandlerClass = _handler(agent, token, _Metrics(agent), done, hello)
    threading.Thread(target=server.serve_forever, name="agent-http", daemon=True).start()
    print(protocol.dumps(hello).decode(), flush=True)
    if broker:
        preload(broker)
    parent = os.getppid()
    deadline = time.monotonic() + max_lifetime_s
    while not done.wait(0.5):
        if os.getppid() != parent or time.monotonic() > deadline:
            break
    agent.shutdown()
    server.shutdown()
    sys.stdout.flush()


def queue_names(queue: str | list[str]) -> tuple[str, ...]:
    """A sender's queues: one, or (MQ's bind not-fixed) each it sends to in turn."""
    return (queue,) if isinstance(queue, str) else tuple(queue)


def main(argv: list[str] | None = None) -> int:
    """``python -m drivers.agent [--host H] [--port P] [--max-lifetime S] [--broker B]``, token in
    ``$SURGE_AGENT_TOKEN``: :func:`serve` with ``surge agent``'s defaults, started without
    typer and every command's options (a tenth of a second of each local agent's start)."""
    parser = argparse.ArgumentParser(prog="python -m drivers.agent",
                                     description="Host workers for a controller.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-lifetime", type=float, default=86400.0,
                        help="Seconds before exiting")
    parser.add_argument("--broker", choices=sorted(DRIVERS),
                        help="Load this broker's driver once listening")
    args = parser.parse_args(argv)
    token = os.environ.get("SURGE_AGENT_TOKEN")
    if not token:
        print("SURGE_AGENT_TOKEN is not set", file=sys.stderr)
        return 2
    serve(args.host, args.port, token, args.max_lifetime, broker=args.broker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
