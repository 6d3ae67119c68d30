"""A real Prometheus (Debian's) set up as the README says, started before the run: it scrapes the
run end to end through ``surge prometheus-config``'s file discovery, and every query of the
shipped Grafana dashboard returns data at a time inside the run; the stat tiles never read
``+Inf`` or ``NaN``, not even after the load (draining, target 0)."""

import json
import math
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from tests.unit.test_grafana import DASHBOARD

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")
PROMETHEUS_PORT = 8940
RATES = (50, 100, 150)  # msg/s per sender, 4 senders
RATE_INTERVAL = "4s"  # Grafana's $__rate_interval at a 1 s scrape: 4 scrapes
DISCOVERY_DELAY_S = 5.0  # Prometheus sends discovered targets to its scrapers this often


def api(path: str, **params) -> dict:
    """One call of Prometheus' HTTP API; its ``data``."""
    url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]


def expression(expr: str, run_id: str) -> str:
    """A dashboard expression as Grafana sends it for one run."""
    return expr.replace("$run_id", run_id).replace("$__rate_interval", RATE_INTERVAL)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """Prometheus started first, from ``surge prometheus-config`` in a fresh state directory (the
    discovery directory exists only because that command made it)."""
    if PROMETHEUS is None:
        pytest.fail("Debian's prometheus is not installed (make deps)")
    state = tmp_path_factory.mktemp("prom-state")
    surge = Path(sys.executable).parent / "surge"
    config = subprocess.run([str(surge), "prometheus-config", "--interval", "1s"],
                            env={**os.environ, "SURGE_STATE_DIR": str(state)},
                            capture_output=True, text=True, check=True).stdout
    sd_dir = state / "prometheus"
    assert sd_dir.is_dir() and not list(sd_dir.iterdir())
    (state / "prometheus.yml").write_text(config)
    log = (state / "prometheus.log").open("w")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={state / 'prometheus.yml'}",
         f"--storage.tsdb.path={state / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                api("status/runtimeinfo")
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, \
                    (state / "prometheus.log").read_text()[-2000:]
                time.sleep(0.3)
        yield sd_dir, state / "prometheus.log"
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


@pytest.fixture(scope="module")
def scraped_run(cluster, topology, prometheus, tmp_path_factory):
    """A run of three steps on the shared cluster, its targets written where Prometheus
    looks; the run's result and the wall times its load began and ended."""
    sd_dir, _ = prometheus
    spec = ScenarioSpec.model_validate({
        "name": "it-prom", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "plain", "senders": 4, "receivers": 4,
                     "message": {"size": "1KiB"}},
        "plan": [{"rate_per_sender": rate, "hold": "6s"} for rate in RATES],
        "measure": {"settle": "1s", "drain": "10s"}})
    controller = Controller(spec, topology, tmp_path_factory.mktemp("prom-runs"), live=False,
                            sd_dir=sd_dir)
    result = controller.run()
    assert result.outcome == "completed"
    ticks = controller.ticks
    return result, controller.run_id, ticks[0]["t"], ticks[-1]["t"]


def test_prometheus_started_first_scrapes_the_whole_run(prometheus, scraped_run):
    _, log = prometheus
    result, run_id, start, end = scraped_run
    assert "no such file or directory" not in log.read_text()
    seconds = end - start
    series = api("query_range", query=f'surge_target_rate{{run_id="{run_id}"}}',
                 start=start, end=end, step="1s")["result"]
    assert len(series) == 1
    points = series[0]["values"]
    # scraped to the end, and from the start but for Prometheus' own delay: its discovery hands
    # new targets to the scrapers every 5 s, so a run on a cluster already up (its first tick
    # a second or two after the targets file) may start up to a scrape interval later than that
    first, last = points[0][0] - start, end - points[-1][0]
    assert first <= DISCOVERY_DELAY_S + 1 and last <= 1, (len(points), seconds, first, last)
    assert len(points) >= seconds - first - last - 1  # every second in between
    targets = {float(value) for _, value in points}
    assert {4.0 * rate for rate in RATES} <= targets, targets
    sent = api("query", query=f'sum(surge_agent_sent_total{{run_id="{run_id}"}})',
               time=end)["result"]
    assert float(sent[0]["value"][1]) == pytest.approx(result.accounting.sent, rel=0.05)


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(panel type, title, expression) of every panel query and annotation."""
    found = [(panel["type"], panel["title"], target["expr"])
             for panel in DASHBOARD["panels"] for target in panel["targets"]]
    return found + [("annotation", a["name"], a["expr"])
                    for a in DASHBOARD["annotations"]["list"]]


def values(data: dict) -> list[float]:
    """Every sample value of an instant or range query's answer."""
    found = []
    for series in data["result"]:
        found += [float(v) for _, v in series.get("values", [series.get("value", [0, "0"])])]
    return found


def test_every_dashboard_query_has_data_inside_the_run(scraped_run):
    _, run_id, start, end = scraped_run
    inside = start + (end - start) * 0.6  # in the last step, well after the first scrape
    empty = []
    for kind, title, expr in dashboard_queries():
        query = expression(expr, run_id)
        if kind == "annotation":  # a change: over the whole run, none while nothing changed
            data = api("query_range", query=query, start=start, end=end, step="1s")
        else:
            data = api("query", query=query, time=inside)
        if not data["result"]:
            empty.append(title)
        assert all(math.isfinite(v) for v in values(data)), (title, query, data)
    assert empty == ["members"]  # the steps changed; the 3 members ran throughout


def test_the_stat_tiles_never_read_inf_or_nan(scraped_run):
    _, run_id, start, end = scraped_run
    for kind, title, expr in dashboard_queries():
        if kind != "stat":
            continue
        data = api("query_range", query=expression(expr, run_id), start=start,
                   end=end + 8, step="1s")  # past the load: the drain, target 0
        shown = values(data)
        assert shown, title
        assert all(math.isfinite(v) for v in shown), (title, [v for v in shown
                                                             if not math.isfinite(v)][:5])
