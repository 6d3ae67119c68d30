"""The controller's own ``/metrics``: the figures of the live view, for Prometheus to scrape."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, start_http_server


class ControllerMetrics:
    """Gauges refreshed once a tick, served on loopback."""

    def __init__(self, port: int = 0):
        self.registry = CollectorRegistry()
        labels = ["scenario"]
        self.target = Gauge("surge_target_rate", "planned msg/s, all senders", labels,
                            registry=self.registry)
        self.sent = Gauge("surge_send_rate", "achieved publish msg/s", labels,
                          registry=self.registry)
        self.received = Gauge("surge_receive_rate", "achieved receive msg/s", labels,
                              registry=self.registry)
        self.members = Gauge("surge_members_running", "broker members running", labels,
                             registry=self.registry)
        self.depth = Gauge("surge_queue_depth", "messages in the workload queue", labels,
                           registry=self.registry)
        self.p99 = Gauge("surge_latency_p99_seconds", "p99 latency of the last second", labels,
                         registry=self.registry)
        self.errors = Gauge("surge_errors", "errors so far", labels, registry=self.registry)
        self.member_cpu = Gauge("surge_member_cpu_percent", "member CPU, 100 = one core",
                                ["scenario", "member"], registry=self.registry)
        server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"

    def update(self, scenario: str, state) -> None:
        """Copy a :class:`orchestrator.liveview.ViewState` into the gauges."""
        self.target.labels(scenario).set(state.target_rate)
        self.sent.labels(scenario).set(state.send_rate)
        self.received.labels(scenario).set(state.receive_rate)
        self.members.labels(scenario).set(state.members_running)
        self.depth.labels(scenario).set(state.queue_depth)
        self.p99.labels(scenario).set(state.p99_ms / 1000)
        self.errors.labels(scenario).set(state.errors)
        for member, cpu in state.member_cpu.items():
            self.member_cpu.labels(scenario, member).set(cpu if cpu is not None else 0.0)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
