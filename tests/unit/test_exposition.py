"""The controller's /metrics port: the default, the fallback when it is taken, and an explicit
port that is taken (ports 7700-7799, occupied here by the test itself)."""

import socket
import urllib.request
from contextlib import closing

import pytest

from orchestrator.run.exposition import ControllerMetrics, MetricsPortError, check_metrics_port
from orchestrator.run.liveview import ViewState


def _occupy(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port, as another process' server would hold it."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", port))
    held.listen()
    return held


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_the_default_port_serves_the_gauges():
    metrics = ControllerMetrics(default_port=7711, say=pytest.fail)
    try:
        assert (metrics.port, metrics.address) == (7711, "127.0.0.1:7711")
        metrics.update("quickstart", ViewState(target_rate=1200.0, p99_ms=8.0))
        text = _scrape(metrics.url)
        assert 'surge_target_rate{scenario="quickstart"} 1200.0' in text
        assert 'surge_latency_p99_seconds{scenario="quickstart"} 0.008' in text
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
        assert "surge_errors" in _scrape(second.url)
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
