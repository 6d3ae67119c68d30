"""The controller's own ``/metrics``: the figures of the live view, for Prometheus to scrape.

It listens on :data:`DEFAULT_METRICS_PORT` unless told otherwise, so a Prometheus can be pointed
at it once and for all. When that port is taken (a second run at the same time), the run still
starts, on a free port, and says so in one line; the run's service-discovery file
(:mod:`orchestrator.run.discovery`) names whichever port it got. A port asked for explicitly is
never swapped: if it is taken, that is a
:class:`~orchestrator.run.ports.MetricsPortError`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

from drivers.metrics import counter_family, gauge_family, histogram_family
from orchestrator.run.listeners import TickRecord
from orchestrator.run.liveview import ViewState
from orchestrator.run.ports import DEFAULT_METRICS_PORT, LOOPBACK, port_error
from orchestrator.run.sampling import Tick
from results.rundir.histogram import LatencyHistogram

# gauge name -> (help, the ViewState attribute it shows, scale to the unit in the name): what
# the live view shows this second, for a dashboard's "now" panels
GAUGES = {
    "surge_target_rate": ("planned msg/s, all senders", "target_rate", 1.0),
    "surge_send_rate": ("achieved publish msg/s of the last second", "send_rate", 1.0),
    "surge_receive_rate": ("achieved receive msg/s of the last second", "receive_rate", 1.0),
    "surge_achieved_ratio": ("achieved end to end over the target of the last second as the "
                             "step table takes it, 1 = on target (no sample without a target)",
                             "achieved_ratio", 1.0),
    "surge_members_running": ("broker members running", "members_running", 1.0),
    "surge_queue_depth": ("messages in the workload queue", "queue_depth", 1.0),
    "surge_in_flight_messages": ("sent but not yet received (consumer lag)", "backlog", 1.0),
    "surge_latency_p50_seconds": ("p50 latency of the last second", "p50_ms", 0.001),
    "surge_latency_p99_seconds": ("p99 latency of the last second", "p99_ms", 0.001),
    "surge_blocked_connections": ("connections the broker blocks now (resource alarm)",
                                  "blocked", 1.0),
}
# counter name (without _total) -> (help, the tick total it counts)
COUNTERS = {
    "surge_sent_messages": ("messages published, all agents", "sent"),
    "surge_received_messages": ("messages received, all agents", "received"),
    "surge_errors": ("errors, all agents", "errors"),
    "surge_reconnects": ("reconnect attempts, all agents", "reconnects"),
    "surge_consumer_cancels": ("consumers the broker cancelled, all agents", "cancels"),
}
# member gauge name -> (help, member row column)
MEMBER_GAUGES = {
    "surge_member_cpu_percent": ("member CPU of the last second, 100 = one core", "cpu_percent"),
    "surge_member_cpu_quota_cores": ("member CPU quota in cores", "cpu_quota_cores"),
    "surge_member_running": ("1 while the member runs", "running"),
}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ControllerMetrics:
    """The run's figures, refreshed once a tick, served on ``address`` (loopback by default):
    gauges of this second, cumulative counters and latency histograms, each labelled
    ``run_id`` and ``scenario`` (and ``member`` per member) so Prometheus can compute rates and
    percentiles across runs.

    ``port``: None for :data:`DEFAULT_METRICS_PORT`, or any free port with one line to ``say``
    when that is taken; 0 for any free port; else exactly that port, or
    :class:`~orchestrator.run.ports.MetricsPortError`. ``default_port`` is there for tests.
    """

    def __init__(self, port: int | None = None, say: Callable[[str], None] | None = None, *,
                 address: str = LOOPBACK, default_port: int = DEFAULT_METRICS_PORT):
        self.registry = CollectorRegistry()
        self.labels: dict[str, str] = {}
        self.state: ViewState | None = None
        self.totals: dict[str, float] = {}
        self.members: list[dict] = []
        self.latency, self.intended = LatencyHistogram(), LatencyHistogram()
        self.confirm = LatencyHistogram()
        self.registry.register(self)
        self.server = self._serve(address, port, default_port, say or _stderr)
        self.port: int = self.server.server_address[1]
        self.address = f"{address}:{self.port}"  # host:port, as Prometheus names a target
        self.url = f"http://{self.address}/metrics"

    def _serve(self, address: str, port: int | None, default_port: int,
               say: Callable[[str], None]):
        wanted = default_port if port is None else port
        try:
            server, _ = start_http_server(wanted, addr=address, registry=self.registry)
            return server
        except OSError as error:
            if port is not None:
                raise port_error(port, address, error) from None
            server, _ = start_http_server(0, addr=address, registry=self.registry)
            say(f"metrics: port {wanted} is in use (another surge run?); /metrics is on "
                f"{address}:{server.server_address[1]} for this run (--metrics-port sets it)")
            return server

    def update(self, state: ViewState, tick: Tick | None = None,
               members: list[dict] | None = None) -> None:
        """Take this tick's view state, totals, latency and member rows (the latency is added
        to the run's histograms; the rest is kept as given, for the next scrape to read)."""
        self.labels = {"run_id": state.run_id, "scenario": state.scenario}
        self.state = state
        if tick is not None:
            self.totals = dict(tick.totals)
            self.latency.merge(tick.latency)
            self.intended.merge(tick.intended)
            self.confirm.merge(tick.confirm)
        if members is not None:
            self.members = members

    def collect(self) -> Iterator:
        """The families, read by the HTTP server's thread at each scrape."""
        state, labels = self.state, self.labels
        if state is None:  # before the first tick: the names, with no samples yet
            for name, (help_text, _, _) in GAUGES.items():
                yield GaugeMetricFamily(name, help_text, labels=["run_id", "scenario"])
            return
        for name, (help_text, attribute, scale) in GAUGES.items():
            value = getattr(state, attribute)
            yield gauge_family(name, help_text, None if value is None else value * scale, labels)
        for name, (help_text, total) in COUNTERS.items():
            if total in self.totals:
                yield counter_family(name, help_text, self.totals[total], labels)
        yield histogram_family("surge_latency_seconds", "end-to-end latency, all agents",
                               self.latency, labels)
        yield histogram_family("surge_intended_latency_seconds", "end-to-end latency from "
                               "the intended send time, all agents", self.intended, labels)
        yield histogram_family("surge_confirm_latency_seconds", "publisher-confirm latency, "
                               "publish to the broker's confirm, all agents", self.confirm,
                               labels)
        members = self.members
        for name, (help_text, column) in MEMBER_GAUGES.items():
            family = GaugeMetricFamily(name, help_text, labels=[*labels, "member"])
            for row in members:
                value = row.get(column)
                if value is not None:  # unknown (a member down): no sample, never NaN
                    family.add_metric([*labels.values(), row["member"]], float(value))
            yield family

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class MetricsFeed:
    """Refreshes :class:`ControllerMetrics` from each second of the run (a listener), with the
    view's state as it stands after the second."""

    def __init__(self, metrics: ControllerMetrics, state: ViewState):
        self.metrics, self.state = metrics, state

    def on_tick(self, record: TickRecord) -> None:
        """Take the second's state, totals, latency and member rows."""
        self.metrics.update(self.state, record.tick, record.member_rows)
