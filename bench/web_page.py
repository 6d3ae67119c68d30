"""The live page's cost to the controller: the controller process's CPU per tick and its tick
lateness, with and without a browser on the page, in alternating pairs of runs.

One local RabbitMQ member (ports from 8650), 10 agents and 400 workers at 1 msg/s per sender
(as bench/controller_scale.py's smaller case), ``--hold`` seconds per run. Every run serves the
page on loopback; in the "browser" runs Debian's headless Chromium keeps it open, polling once
a second as a person's would. CPU per tick is ``run.json``'s ``sampling.controller_cpu_percent``
(the controller process's CPU over the load, every thread, the page's server included) x 10 ms
(one tick a second: 1 % of a core is 10 ms per tick).

    .venv/bin/python bench/web_page.py [--pairs 3] [--hold 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.controller_scale import _figures, _raise_file_limit, _scenario  # noqa: E402
from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.specs.topology import QueueSpec, TopologySpec  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

PORT_BASE = 8650
CHROMIUM = "/usr/bin/chromium"


def run_once(topology: TopologySpec, runs: Path, args: argparse.Namespace, browser) -> dict:
    """One run; with ``browser``, the page open in it for the whole load."""
    controller = Controller(_scenario(10, 400, args), topology, runs, live=False,
                            web="127.0.0.1:0")
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    page = None
    if browser is not None:
        while controller.page is None and thread.is_alive():
            time.sleep(0.1)
        page = browser.new_page()
        page.goto(controller.page.url)
    thread.join()
    figures = _figures(controller.run_dir)
    if page is not None:
        figures["points"] = page.evaluate("window.surgeView.points")
        page.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--hold", type=float, default=40.0)
    args = parser.parse_args()
    args.rate, args.queues = 1.0, 20
    _raise_file_limit()
    topology = TopologySpec(name="bench-web", members=1, start=1, port_base=PORT_BASE,
                            queues=[QueueSpec(name="ctlscale-%d", count=args.queues)])
    provisioner = LocalRabbitMQ(topology)
    from playwright.sync_api import sync_playwright
    results: dict[str, list[dict]] = {"no browser": [], "browser": []}
    try:
        provisioner.up()
        with tempfile.TemporaryDirectory() as runs, sync_playwright() as driver:
            chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for pair in range(args.pairs):
                for name, browser in (("no browser", None), ("browser", chromium)):
                    figures = run_once(topology, Path(runs), args, browser)
                    results[name].append(figures)
                    print(f"pair {pair + 1} {name:>10}: controller CPU "
                          f"{figures['controller_cpu'] * 10:.1f} ms/tick, lateness p99 "
                          f"{figures['late']['p99'] * 1000:.1f} ms, ticks {figures['ticks']}"
                          + (f", page points {figures['points']}" if browser else ""),
                          flush=True)
            chromium.close()
    finally:
        provisioner.down()
    plain = [f["controller_cpu"] * 10 for f in results["no browser"]]
    watched = [f["controller_cpu"] * 10 for f in results["browser"]]
    print(f"controller CPU per tick, median: {statistics.median(plain):.1f} ms without a "
          f"browser, {statistics.median(watched):.1f} ms with one (ratio "
          f"{statistics.median(watched) / statistics.median(plain):.2f}); pairs: "
          + ", ".join(f"{w / p:.2f}" for p, w in zip(plain, watched)))


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("web_page"):
        main()
