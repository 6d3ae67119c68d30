"""The controller's /metrics port: the default, the fallback when it is taken, and an explicit
port that is taken (ports 7700-7799, occupied here by the test itself)."""

import socket
import urllib.request
from contextlib import closing
from types import SimpleNamespace

import pytest

from orchestrator.run.exposition import ControllerMetrics
from orchestrator.run.liveview import ViewState
from orchestrator.run.ports import MetricsPortError, check_metrics_port
from results.rundir.histogram import LatencyHistogram


def _occupy(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port, as another process' server would hold it."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", port))
    held.listen()
    return held


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_the_default_port_serves_gauges_counters_and_histograms_with_their_labels():
    metrics = ControllerMetrics(default_port=7711, say=pytest.fail)
    try:
        assert (metrics.port, metrics.address) == (7711, "127.0.0.1:7711")
        state = ViewState(scenario="quickstart", run_id="r1", target_rate=1200.0, p99_ms=8.0)
        latency = LatencyHistogram()
        for value_us in (800, 3000, 40_000):
            latency.record(value_us)
        confirm = LatencyHistogram()
        confirm.record_many(1500, 10)
        totals = {"sent": 2400, "received": 2390, "errors": 1, "reconnects": 0}
        for _ in range(2):  # the histogram adds up over ticks, the totals are taken as given
            metrics.update(state, SimpleNamespace(totals=totals, latency=latency,
                                                  intended=LatencyHistogram(),
                                                  confirm=confirm),
                           [{"member": "rabbit-0", "cpu_percent": 41.5, "running": True,
                             "cpu_quota_cores": 0.5}])
        text = _scrape(metrics.url)
        run = 'run_id="r1",scenario="quickstart"'
        assert f"surge_target_rate{{{run}}} 1200.0" in text
        assert f"surge_latency_p99_seconds{{{run}}} 0.008" in text
        assert f"surge_sent_messages_total{{{run}}} 2400.0" in text
        assert f"surge_errors_total{{{run}}} 1.0" in text
        assert f'surge_latency_seconds_bucket{{le="0.001",{run}}} 2.0' in text
        assert f'surge_latency_seconds_bucket{{le="+Inf",{run}}} 6.0' in text
        assert f'surge_confirm_latency_seconds_bucket{{le="0.001",{run}}} 0.0' in text
        assert f'surge_confirm_latency_seconds_bucket{{le="0.0025",{run}}} 20.0' in text
        assert f'surge_member_cpu_percent{{member="rabbit-0",{run}}} 41.5' in text
        assert f'surge_member_cpu_quota_cores{{member="rabbit-0",{run}}} 0.5' in text
        assert f"surge_queue_depth{{{run}}} 0.0" in text
    finally:
        metrics.close()


def test_a_taken_default_port_falls_back_to_a_free_one_with_one_line():
    said = []
    with closing(_occupy(7712)):
        metrics = ControllerMetrics(default_port=7712, say=said.append)
        try:
            assert metrics.port != 7712
            assert said == [f"metrics: port 7712 is in use (another surge run?); /metrics is on "
                            f"127.0.0.1:{metrics.port} for this run (--metrics-port sets it)"]
            assert "surge_target_rate" in _scrape(metrics.url)
        finally:
            metrics.close()


def test_a_second_run_at_the_same_time_still_gets_its_metrics():
    said = []
    first = ControllerMetrics(default_port=7713, say=said.append)
    second = ControllerMetrics(default_port=7713, say=said.append)
    try:
        assert first.port == 7713 and second.port not in (0, 7713)
        assert len(said) == 1 and "port 7713 is in use" in said[0]
        assert "surge_target_rate" in _scrape(second.url)
    finally:
        second.close()
        first.close()


def test_an_explicit_port_is_used_exactly_or_is_an_error():
    metrics = ControllerMetrics(7714, say=pytest.fail)
    try:
        assert metrics.port == 7714
    finally:
        metrics.close()
    with closing(_occupy(7715)):
        with pytest.raises(MetricsPortError, match=r"--metrics-port 7715: 127\.0\.0\.1:7715 is "
                                                   r"in use; choose another port, or 0"):
            check_metrics_port(7715)
        with pytest.raises(MetricsPortError, match="7715 is in use"):
            ControllerMetrics(7715, say=pytest.fail)
    check_metrics_port(7715)  # free again
    check_metrics_port(None)  # the default is never checked: it falls back
    check_metrics_port(0)


def test_port_0_is_any_free_port():
    metrics = ControllerMetrics(0, say=pytest.fail, default_port=7716)
    try:
        assert metrics.port not in (0, 7716)
        assert metrics.url == f"http://127.0.0.1:{metrics.port}/metrics"
    finally:
        metrics.close()


def _samples(state: ViewState, members: list[dict]) -> dict[str, list]:
    metrics = SimpleNamespace(state=state, labels={"run_id": "r", "scenario": "s"}, totals={},
                              latency=LatencyHistogram(), intended=LatencyHistogram(),
                              confirm=LatencyHistogram(), members=members)
    return {family.name: family.samples for family in ControllerMetrics.collect(metrics)}


def test_a_figure_unknown_this_second_has_no_sample_never_nan_or_infinity():
    running = _samples(ViewState(target_rate=1000.0, send_rate=1000.0, receive_rate=990.0),
                       [{"member": "m0", "cpu_percent": 42.0}, {"member": "m1"}])
    assert [s.value for s in running["surge_achieved_ratio"]] == [0.99]
    assert [s.labels["member"] for s in running["surge_member_cpu_percent"]] == ["m0"]
    draining = _samples(ViewState(target_rate=0.0, send_rate=0.0, receive_rate=500.0,
                                  p99_ms=None), [])
    assert draining["surge_achieved_ratio"] == [] and draining["surge_latency_p99_seconds"] == []
    assert [s.value for s in draining["surge_receive_rate"]] == [500.0]
