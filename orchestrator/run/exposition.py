"""The controller's own ``/metrics``: the figures of the live view, for Prometheus to scrape."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, start_http_server

NAN = float("nan")  # Prometheus' value for "unknown this scrape"

# gauge name -> (help, the ViewState attribute it shows, scale to the unit in the name)
GAUGES = {
    "surge_target_rate": ("planned msg/s, all senders", "target_rate", 1.0),
    "surge_send_rate": ("achieved publish msg/s", "send_rate", 1.0),
    "surge_receive_rate": ("achieved receive msg/s", "receive_rate", 1.0),
    "surge_members_running": ("broker members running", "members_running", 1.0),
    "surge_queue_depth": ("messages in the workload queue", "queue_depth", 1.0),
    "surge_latency_p99_seconds": ("p99 latency of the last second", "p99_ms", 0.001),
    "surge_errors": ("errors so far", "errors", 1.0),
}


class ControllerMetrics:
    """Gauges refreshed once a tick, served on loopback."""

    def __init__(self, port: int = 0):
        self.registry = CollectorRegistry()
        self.gauges = {name: Gauge(name, help_text, ["scenario"], registry=self.registry)
                       for name, (help_text, _, _) in GAUGES.items()}
        self.member_cpu = Gauge("surge_member_cpu_percent", "member CPU, 100 = one core",
                                ["scenario", "member"], registry=self.registry)
        self.server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def update(self, scenario: str, state) -> None:
        """Copy a :class:`~orchestrator.run.liveview.ViewState` into the gauges (NaN if unknown)."""
        for name, (_, attribute, scale) in GAUGES.items():
            value = getattr(state, attribute)
            self.gauges[name].labels(scenario).set(NAN if value is None else value * scale)
        for member, cpu in state.member_cpu.items():
            self.member_cpu.labels(scenario, member).set(NAN if cpu is None else cpu)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
