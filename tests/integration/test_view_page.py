"""``surge view`` of a finished run in a real browser (Debian's headless Chromium): the page
opens on the step table and the accounting with the final step's figures, legends show the last
values, and one outlier second is marked at the top of the rate chart instead of rescaling it.
The run is a synthetic one (no broker needed) with a second published and received far above
its target."""

import subprocess
import sys

import pytest

from results.rundir.manifest import read_manifest
from results.rundir.tables import read_table
from results.synthetic import DRAIN_RATE, write_run
from tests.integration.test_live_page import browser, open_page  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

OUTLIER_S, OUTLIER_RATE = 25, 8490.0


@pytest.fixture(scope="module")
def outlier_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("view") / "outlier"
    write_run(run_dir, seconds=60, phase_s=20, drain_s=5, outliers={OUTLIER_S: OUTLIER_RATE},
              closed=True)
    return run_dir


@pytest.fixture(scope="module")
def view_page(browser, outlier_run):  # noqa: F811 - the fixture imported above
    server = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "view",
                               str(outlier_run), "--web", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split(": ", 1)[1].split()[0]
        ticks = read_table(outlier_run, "ticks").num_rows
        steps = len(read_manifest(outlier_run).steps)
        page, errors = open_page(browser, url, at_least=ticks, steps=steps)
        yield page
        assert errors == []
        page.close()
    finally:
        server.terminate()
        server.wait(10)


def test_a_finished_run_opens_on_its_result(view_page, outlier_run):
    final = read_manifest(outlier_run).steps[-1]
    now = view_page.locator("#now").inner_text()
    assert "final achieved end to end" in now
    assert f"{final.achieved_rate:,.0f} msg/s ({final.achieved_rate / final.target_rate:.1%})" \
        .replace("%", " %") in now
    assert "target\n0 msg/s" not in now and "balanced" in now
    order = view_page.evaluate("""() => [...document.body.children].map(e => e.id)
        .filter(id => ["steps-section", "accounting-section", "charts"].includes(id))""")
    assert order == ["steps-section", "accounting-section", "charts"]
    assert view_page.locator("#accounting-section").is_visible()


def test_legends_show_the_last_values_when_nothing_is_hovered(view_page):
    values = view_page.locator("#chart-rates .u-legend .u-value").all_inner_texts()
    assert values[:4] == ["65 s", "0", "0", f"{DRAIN_RATE:,.0f}"]  # seconds, target, sent, received


def test_one_outlier_second_does_not_rescale_the_rate_chart(view_page, outlier_run):
    ticks = read_table(outlier_run, "ticks").to_pylist()
    highest_target = max(t["target_rate"] for t in ticks)
    ordinary = max(t["send_rate"] for t in ticks if t["elapsed_s"] != OUTLIER_S)
    top = view_page.evaluate("() => window.surgeView.charts.rates.scales.y.max")
    assert max(highest_target, ordinary) <= top < OUTLIER_RATE / 2
    clipped = view_page.locator("#chart-rates .u-legend .u-series").nth(4).inner_text()
    assert "above the scale" in clipped and f"1 s, up to {OUTLIER_RATE:,.0f} msg/s" in clipped


@pytest.mark.parametrize(("measured", "clips"), [
    ([1000.0] * 60 + [8490.0], True),  # one second far above the rest
    ([1000.0] * 30 + [3000.0] * 30, False),  # half the run at a higher rate is no outlier
    ([900.0] * 60 + [1150.0], False),  # within the margin of the target
])
def test_the_rate_scale_rule(view_page, measured, clips):
    targets = [1000.0] * len(measured)
    top = view_page.evaluate("([m, t]) => window.surgeScale.rateCeiling(m, t)",
                             [measured, targets])
    assert (max(measured) > top) == clips
    assert top >= max(targets)
