"""The live page in a real browser (Debian's headless Chromium): during a real run the rate
chart fills in and the step table gets its rows; after it, ``surge view`` shows the recorded
run with its steps and accounting."""

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from results.rundir.tables import read_table
from tests.unit.test_grafana import metric_names

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    assert os.path.exists(CHROMIUM), "Debian's chromium is not installed (make deps)"
    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def live_run(cluster, topology, tmp_path_factory):
    """A short run on the shared cluster with its page on loopback, going in a thread."""
    spec = ScenarioSpec.model_validate({
        "name": "it-web", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "plain", "senders": 4, "receivers": 4,
                     "message": {"size": "1KiB"}},
        "plan": [{"rate_per_sender": 50, "hold": "6s"}, {"rate_per_sender": 100, "hold": "8s"},
                 {"rate_per_sender": 150, "hold": "8s"}],
        "measure": {"settle": "1s", "drain": "20s"}})
    controller = Controller(spec, topology, tmp_path_factory.mktemp("web-runs"), live=False,
                            web="127.0.0.1:0")
    ended: dict = {}
    thread = threading.Thread(target=lambda: ended.update(result=controller.run()), daemon=True)
    thread.start()
    try:
        yield controller, thread, ended
    finally:
        controller.request_stop()
        thread.join(120)


def open_page(browser, url: str, at_least: int, steps: int):
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_function(
        f"window.surgeView && window.surgeView.points >= {at_least} && "
        f"document.querySelectorAll('#steps tbody tr').length >= {steps}", timeout=90_000)
    return page, errors


def test_the_live_page_fills_in_as_the_run_goes(browser, live_run, tmp_path):
    controller, thread, _ = live_run
    deadline = time.monotonic() + 60
    while controller.page is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert controller.page is not None and controller.page.url.startswith("http://127.0.0.1:")
    page, errors = open_page(browser, controller.page.url, at_least=5, steps=1)
    assert thread.is_alive(), "the run ended before the page showed it: not a live view"
    shown = page.evaluate("""() => ({points: window.surgeView.points,
        members: window.surgeView.members.size, run: window.surgeView.runId,
        target: window.surgeView.ticks.target_rate.slice(-1)[0]})""")
    members = {row["member"] for row in controller.member_rows}
    assert shown["run"] == controller.run_id and shown["members"] == len(members)
    assert shown["target"] in {row["target_rate"] for row in controller.ticks}
    events = page.locator("#events").inner_text()
    assert "members_up" in events and "step: step=1" in events, events
    first_step = page.locator("#steps tbody tr").first.inner_text().split()
    # step 1: 4 senders, 4 receivers, 1 queue; 4 senders x 50 msg/s
    assert first_step[:5] == ["1", "4", "4", "1", "200"], first_step
    header = page.locator("#steps thead").inner_text()
    assert "target msg/s" in header and "senders" in header and "saturated" in header
    page.screenshot(path=tmp_path / "live.png", full_page=True)
    assert (tmp_path / "live.png").stat().st_size > 30_000
    assert errors == []
    page.close()


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_every_metric_the_dashboard_queries_is_in_a_real_scrape(live_run):
    controller, thread, _ = live_run
    assert thread.is_alive(), "the run ended before its metrics were scraped"
    where = controller.manifest.prometheus
    controller_text = scrape(f"http://{where.controller}/metrics")
    agent_texts = [scrape(f"http://{agent}/metrics") for agent in where.agents]
    broker_texts = [scrape(m.metrics_url) for m in controller.provisioner.status() if m.running]
    exposed = {line.split("{")[0].split(" ")[0]
               for text in [controller_text, *agent_texts, *broker_texts]
               for line in text.splitlines() if line and not line.startswith("#")}
    assert metric_names() - exposed == set()
    run = f'run_id="{controller.run_id}"'
    assert f'surge_sent_messages_total{{{run},scenario="it-web"}}' in controller_text
    assert all(f'agent="{i}",{run}' in text for i, text in enumerate(agent_texts))
    assert 'surge_member_cpu_percent{member="' in controller_text


def test_surge_view_shows_a_finished_run_from_its_directory(browser, live_run, tmp_path):
    controller, thread, ended = live_run
    thread.join(120)
    result = ended["result"]
    assert result.outcome == "completed"
    surge = Path(sys.executable).parent / "surge"
    server = subprocess.Popen([str(surge), "view", str(result.run_dir), "--web", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        url = line.split(": ", 1)[1].split()[0]
        ticks = read_table(result.run_dir, "ticks").num_rows
        page, errors = open_page(browser, url, at_least=ticks, steps=len(result.steps))
        assert page.locator("#steps tbody tr").count() == 3
        assert page.locator("#accounting-section").is_visible()
        assert "balanced" in page.locator("#accounting").inner_text()
        assert "recorded (completed)" in page.locator("#now").inner_text()
        page.screenshot(path=tmp_path / "view.png", full_page=True)
        assert errors == []
    finally:
        server.terminate()
        server.wait(10)
