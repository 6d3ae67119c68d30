"""The PNG plots, read from matplotlib's own objects before they are saved: a run's figures
shade and label its steps and draw each step's p95 and p99.9; ``surge compare --plot``
overlays runs with one line and one legend entry per run. Runs are synthetic ones."""

import subprocess
import sys

import pytest
from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle
from PIL import Image

from results.compare import plot, plot_runs
from results.plots import compare_figures, mean_cpu_per_second, run_figures
from results.rundir.manifest import read_manifest
from results.synthetic import write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three finished synthetic runs: two, three and four steps."""
    root = tmp_path_factory.mktemp("plots")
    dirs = []
    for steps, seed in ((2, 1), (3, 2), (4, 3)):
        run_dir = root / f"run-{steps}-steps"
        write_run(run_dir, seconds=10 * steps, phase_s=10, second_member_at=10 * steps + 1,
                  samples=100, drain_s=3, seed=seed, closed=True)
        dirs.append(run_dir)
    return dirs


def test_a_runs_figures_shade_and_label_its_steps_and_draw_p95_and_p999(runs):
    run_dir = runs[2]
    manifest = read_manifest(run_dir)
    data = plot_runs([run_dir])[run_dir.name]
    figures = run_figures(data["ticks"], data["members"], [], manifest.phases, manifest.steps)
    assert set(figures) == {"rate.png", "cpu.png", "latency.png", "backlog.png", "memory.png",
                            "network.png", "connections.png"}
    for fig in figures.values():
        ax = fig.axes[0]
        bands = [p for p in ax.patches if isinstance(p, Rectangle)
                 and p.get_label() != "memory alarm"]
        assert len(bands) == (len(manifest.phases) + 1) // 2  # every other step
        assert [t.get_text() for t in ax.texts] == [f"step {p.index}" for p in manifest.phases]
    latency = figures["latency.png"].axes[0]
    legend = [t.get_text() for t in latency.get_legend().get_texts()]
    assert {"p50", "p99", "p95 of the step", "p99.9 of the step"} <= set(legend)
    segments = {c.get_label(): c.get_segments() for c in latency.collections
                if isinstance(c, LineCollection)}
    for field, label in (("p95_ms", "p95 of the step"), ("p999_ms", "p99.9 of the step")):
        assert [s[0][1] for s in segments[label]] == [getattr(r, field) for r in manifest.steps]
        assert [(s[0][0], s[1][0]) for s in segments[label]] == \
            [(r.start_s, r.end_s) for r in manifest.steps]


def test_compare_overlays_the_runs_one_legend_entry_each(runs):
    figures = compare_figures(plot_runs(runs))
    names = [r.name for r in runs]
    assert set(figures) == {"compare-rate.png", "compare-latency.png", "compare-cpu.png"}
    for name, fig in figures.items():
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == names, name
    rate = figures["compare-rate.png"].axes[0]
    assert len(rate.lines) == 2 * len(runs)  # consumed and (dashed, unlabelled) target
    latency = figures["compare-latency.png"].axes[0]
    for line, run_dir in zip(latency.lines, runs):
        steps = read_manifest(run_dir).steps
        assert list(line.get_xdata()) == [s.achieved_rate for s in steps]
        assert list(line.get_ydata()) == [s.p99_ms for s in steps]


def test_the_mean_cpu_of_each_second_is_over_the_running_members():
    rows = [{"elapsed_s": 1.0, "member": "a", "running": True, "cpu_percent": 20.0},
            {"elapsed_s": 1.0, "member": "b", "running": True, "cpu_percent": 40.0},
            {"elapsed_s": 2.0, "member": "a", "running": True, "cpu_percent": 10.0},
            {"elapsed_s": 2.0, "member": "b", "running": False, "cpu_percent": 90.0}]
    assert mean_cpu_per_second(rows) == ([1.0, 2.0], [30.0, 10.0])


def test_surge_compare_plot_writes_the_pngs_side_by_side(runs, tmp_path):
    out = tmp_path / "plots"
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "compare", *map(str, runs),
                           "--plot", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in out.iterdir())
    assert written == ["compare-cpu.png", "compare-latency.png", "compare-rate.png"]
    assert f"plots: {out / 'compare-rate.png'}" in done.stdout
    assert all(Image.open(out / name).size == (1000, 450) for name in written)


def test_two_runs_of_the_same_name_are_refused(runs, tmp_path):
    from orchestrator.errors import SurgeError
    with pytest.raises(SurgeError, match="two runs named alike"):
        plot([runs[0], runs[0]], tmp_path)


def test_memory_is_drawn_against_each_members_watermark_with_alarm_seconds_shaded(runs):
    from results.rundir.tables import read_rows
    from results.synthetic import MEMORY_LIMIT_MIB, MEMORY_START_MIB
    run_dir = runs[2]
    manifest = read_manifest(run_dir)
    members = read_rows(run_dir, "members")
    hosts = read_rows(run_dir, "hosts")
    figures = run_figures(read_rows(run_dir, "ticks"), members, [], manifest.phases,
                          manifest.steps, hosts)
    memory = figures["memory.png"].axes[0]
    lines = {line.get_label(): line for line in memory.get_lines()}
    first = lines["surge-x-0"]
    assert list(first.get_ydata()[:2]) == [MEMORY_START_MIB + 1, MEMORY_START_MIB + 2]
    assert set(lines["surge-x-0 high watermark"].get_ydata()) == {MEMORY_LIMIT_MIB}
    assert lines["surge-x-0 high watermark"].get_linestyle() == "--"
    assert lines["surge-x-0 high watermark"].get_color() == first.get_color()
    alarmed = [(p.get_x(), p.get_x() + p.get_width()) for p in memory.patches
               if p.get_label() == "memory alarm"]
    over = sorted(r["elapsed_s"] for r in members if r["memory_alarm"])
    assert over and alarmed == [(over[0] - 1, over[-1])]  # the seconds in alarm, one span
    host = figures["hosts.png"].axes[0]
    assert {line.get_label() for line in host.get_lines()} == {"controller", "broker-1"}
    assert set(host.get_lines()[0].get_ydata()) <= {50.0, 30.0}
    connections = figures["connections.png"].axes[0]
    assert {line.get_label() for line in connections.get_lines()} == {"surge-x-0", "surge-x-1"}
    network = {line.get_label(): line for line in figures["network.png"].axes[0].get_lines()}
    assert set(network) == {f"surge-x-{i} {way}" for i in (0, 1) for way in ("in", "out", "link")}
    assert network["surge-x-1 out"].get_linestyle() == "--"
    assert set(network["surge-x-0 link"].get_ydata()) == {100.0}


def test_a_figure_with_nothing_recorded_is_not_drawn(runs):
    run_dir = runs[0]
    manifest = read_manifest(run_dir)
    data = plot_runs([run_dir])[run_dir.name]
    unknown = [{**row, "memory_bytes": None, "connections": None, "network_in_mbps": None}
               for row in data["members"]]
    figures = run_figures(data["ticks"], unknown, [], manifest.phases, manifest.steps, [])
    assert set(figures) == {"rate.png", "cpu.png", "latency.png", "backlog.png"}


@pytest.mark.parametrize(("seconds", "expected"), [
    ([], []), ([5.0], [(4.0, 5.0)]), ([1.0, 2.0, 3.0, 7.0, 8.0], [(0.0, 3.0), (6.0, 8.0)]),
    ([2.0, 3.4], [(1.0, 3.4)]), ([2.0, 4.0], [(1.0, 2.0), (3.0, 4.0)])])
def test_alarm_seconds_are_shaded_as_spans_of_consecutive_ticks(seconds, expected):
    from results.plots import spans
    assert spans(seconds) == expected
