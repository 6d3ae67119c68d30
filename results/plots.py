"""The PNG plots: one run's (``analysis/`` of ``surge analyze``) and runs overlaid (``surge
compare --plot``), drawn by the same helpers. A figure is built and returned (its axes can be
read) before :func:`save` writes it; an unknown reading (``None``) is a gap, never a zero."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from statistics import fmean
from types import ModuleType
from typing import Any

from results.rundir.steps import StepRow

SIZE_IN = (10, 4.5)
DPI = 100
BAND_COLOUR, BAND_ALPHA = "tab:grey", 0.08
STEP_PERCENTILES = (("p95_ms", "p95", ":"), ("p999_ms", "p99.9", "-."))
"""The step rows' percentiles drawn over each step's span (a per-second series records only
p50 and p99): field, label, line style."""
MARKED_EVENTS = {"member_started": ("member started", "tab:green"),
                 "member_stopped": ("member stopped", "tab:purple"),
                 "fault": ("fault", "tab:red"),
                 "member_lost": ("member lost", "tab:red"),
                 "fault_cleared": ("fault over", "tab:orange"),
                 "member_restarted": ("member restarted", "tab:olive")}

Draw = Callable[[Any], Any]


def load_plotting() -> ModuleType:
    """matplotlib's pyplot on the file-only Agg backend (about a second to import: a caller
    may do it ahead, in a thread of its own, while it waits for something else)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def known(values: Iterable[Any]) -> list[float]:
    """Unknown (``None``) as NaN, so a plot shows a gap, not a zero."""
    return [math.nan if v is None else v for v in values]


def figure(ylabel: str, title: str, draw: Draw, xlabel: str = "elapsed time (s)",
           before: Draw | None = None, legend: str = "upper left") -> Any:
    """A figure of one axes: ``before`` (e.g. :func:`step_bands`) under what ``draw`` plots,
    a legend (at ``legend``) with each label once, and the labels and grid."""
    plt = load_plotting()
    fig, ax = plt.subplots(figsize=SIZE_IN)
    if before:
        before(ax)
    draw(ax)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), loc=legend, fontsize="small")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, pad=16)  # room for the step labels above the axes
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save(figures: Mapping[str, Any], out: Path) -> list[str]:
    """Write each figure as ``out/<name>`` (PNG) and close it; the names written."""
    plt = load_plotting()
    out.mkdir(parents=True, exist_ok=True)
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=DPI)
        plt.close(fig)
    return list(figures)


def step_bands(phases: Sequence[Any]) -> Draw:
    """Shade every other plan step over its span and label each at the top ("step N")."""
    def draw(ax) -> None:
        for i, phase in enumerate(phases):
            fields = phase if isinstance(phase, dict) else phase.__dict__
            start, end = fields["start_s"], fields["end_s"]
            if i % 2 == 0:
                ax.axvspan(start, end, color=BAND_COLOUR, alpha=BAND_ALPHA, linewidth=0)
            ax.text((start + end) / 2, 1.0, f"step {fields['index']}", ha="center",
                    va="bottom", fontsize="small", color="dimgrey",
                    transform=ax.get_xaxis_transform())
    return draw


def event_lines(ax, events: list[dict], t0: float) -> None:
    """A dashed vertical line at each event a reader should see (:data:`MARKED_EVENTS`)."""
    for event in events:
        if event["kind"] in MARKED_EVENTS:
            label, color = MARKED_EVENTS[event["kind"]]
            ax.axvline(event["t"] - t0, color=color, linestyle="--", linewidth=1, label=label)


def rate_lines(ax, ticks: list[dict]) -> None:
    """One run's target, published and consumed rate per second."""
    x = [t["elapsed_s"] for t in ticks]
    ax.plot(x, known(t["target_rate"] for t in ticks), label="target")
    ax.plot(x, known(t["send_rate"] for t in ticks), label="published", linewidth=1)
    ax.plot(x, known(t["receive_rate"] for t in ticks), label="consumed", linewidth=1)


def cpu_lines(ax, members: list[dict]) -> None:
    """Each member's CPU per second (while it runs) and the quota lines."""
    for name in sorted({m["member"] for m in members}):
        rows = [m for m in members if m["member"] == name]
        ax.plot([m["elapsed_s"] for m in rows],
                known(m["cpu_percent"] if m["running"] else None for m in rows),
                label=name.split("@")[0])
    for quota in sorted({m["cpu_quota_cores"] for m in members if m.get("cpu_quota_cores")}):
        ax.axhline(quota * 100, color="grey", linestyle=":", label=f"CPU quota ({quota:g} cores)")
    ax.set_ylim(bottom=0)


MIB = 1 << 20
ALARM_COLOUR, ALARM_ALPHA = "tab:red", 0.15


def by_member(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows of the members table grouped by member, members in name order."""
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[row["member"]].append(row)
    return dict(sorted(grouped.items()))


def has_figure(rows: list[dict], column: str) -> bool:
    """Whether any row knows ``column`` (a figure with nothing to show is not drawn)."""
    return any(row.get(column) is not None for row in rows)


def member_lines(ax, members: list[dict], column: str, scale: float = 1.0) -> None:
    """One line per member of ``column`` (divided by ``scale``) over time; gaps where unknown
    or the member is not running."""
    for name, rows in by_member(members).items():
        ax.plot([m["elapsed_s"] for m in rows],
                known(m[column] / scale if m["running"] and m.get(column) is not None
                      else None for m in rows), label=name.split("@")[0])


def memory_lines(ax, members: list[dict]) -> None:
    """Each member's memory in use and its high watermark (dashed, in the member's colour),
    in MiB, with every second some member's memory alarm was in effect shaded."""
    for i, (name, rows) in enumerate(by_member(members).items()):
        x = [m["elapsed_s"] for m in rows]
        short = name.split("@")[0]
        ax.plot(x, known(m["memory_bytes"] / MIB if m["running"] and m.get("memory_bytes")
                         is not None else None for m in rows), color=f"C{i}", label=short)
        ax.plot(x, known(m["memory_limit_bytes"] / MIB if m["running"]
                         and m.get("memory_limit_bytes") is not None else None for m in rows),
                color=f"C{i}", linestyle="--", linewidth=1, label=f"{short} high watermark")
    for start, end in spans({m["elapsed_s"] for m in members if m.get("memory_alarm")}):
        ax.axvspan(start, end, color=ALARM_COLOUR, alpha=ALARM_ALPHA, linewidth=0,
                   label="memory alarm")
    ax.set_yscale("log")


def network_lines(ax, members: list[dict]) -> None:
    """Each member's client traffic in (solid) and out (dashed, in the member's colour) in
    Mb/s, and its link's bandwidth (dotted) where the topology gives it. A second whose count
    the broker had not refreshed is left out (the next one spans it); a stopped member's
    seconds break the line."""
    for i, (name, rows) in enumerate(by_member(members).items()):
        short = name.split("@")[0]
        for column, style, label in (("network_in_mbps", "-", f"{short} in"),
                                     ("network_out_mbps", "--", f"{short} out")):
            points = [(m["elapsed_s"], m.get(column) if m["running"] else float("nan"))
                      for m in rows]
            shown = [(x, y) for x, y in points if y is not None]
            ax.plot([x for x, _ in shown], [y for _, y in shown], color=f"C{i}",
                    linestyle=style, linewidth=1, label=label)
        links = {m["network_link_mbps"] for m in rows if m.get("network_link_mbps")}
        if links:
            ax.axhline(max(links), color=f"C{i}", linestyle=":", linewidth=1,
                       label=f"{short} link")


def spans(seconds: Iterable[float]) -> list[tuple[float, float]]:
    """Runs of consecutive ticks (each ``s`` covering (s - 1, s]) as (start, end) spans."""
    out: list[tuple[float, float]] = []
    for second in sorted(seconds):
        if out and second - out[-1][1] <= 1.5:  # the next tick, however late it fired
            out[-1] = (out[-1][0], second)
        else:
            out.append((second - 1, second))
    return out


def host_lines(ax, hosts: list[dict]) -> None:
    """Each host's CPU per second (% of the whole host, all its cores)."""
    for name in sorted({h["host"] for h in hosts}):
        rows = [h for h in hosts if h["host"] == name]
        ax.plot([h["elapsed_s"] for h in rows], known(h["cpu_percent"] for h in rows),
                label=name)
    ax.set_ylim(0, 100)


def latency_lines(ax, ticks: list[dict], steps: Sequence[StepRow]) -> None:
    """p50 and p99 per second (and p99 from the intended send), and each step's p95 and p99.9
    of its merged histogram as a segment over the step's span."""
    x = [t["elapsed_s"] for t in ticks]
    ax.plot(x, known(t["latency_p50_ms"] for t in ticks), label="p50")
    ax.plot(x, known(t["latency_p99_ms"] for t in ticks), label="p99")
    ax.plot(x, known(t.get("intended_p99_ms") for t in ticks), label="p99 from intended send",
            linestyle="--")
    for field, label, style in STEP_PERCENTILES:
        shown = [row for row in steps if getattr(row, field) is not None]
        ax.hlines([getattr(row, field) for row in shown], [row.start_s for row in shown],
                  [row.end_s for row in shown], colors="black", linestyles=style, linewidth=1.5,
                  label=f"{label} of the step")
    ax.set_yscale("log")


def run_figures(ticks: list[dict], members: list[dict], events: list[dict],
                phases: Sequence[Any], steps: Sequence[StepRow],
                hosts: Sequence[dict] = ()) -> dict[str, Any]:
    """One run's figures by file name (none without ticks): rate, CPU, latency and backlog
    over time, and where recorded the members' memory against their high watermarks, their
    network traffic, the hosts' CPU and the members' connections; each step shaded and
    labelled, events marked."""
    if not ticks:
        return {}
    t0 = next((e["t"] for e in events if e["kind"] == "step"),
              ticks[0]["t"] - ticks[0]["elapsed_s"])
    bands = step_bands(phases)

    def with_events(draw: Draw) -> Draw:
        return lambda ax: (draw(ax), event_lines(ax, events, t0))

    figures = {
        "rate.png": figure("messages per second (msg/s)", "Target, published and consumed rate",
                           with_events(lambda ax: rate_lines(ax, ticks)), before=bands),
        "cpu.png": figure("CPU (% of one core)", "CPU per member",
                          with_events(lambda ax: cpu_lines(ax, members)), before=bands),
        "latency.png": figure("latency (ms)", "Latency per second, and per step",
                              with_events(lambda ax: latency_lines(ax, ticks, steps)),
                              before=bands),
        "backlog.png": figure("messages queued", "Backlog", with_events(
            lambda ax: ax.plot([t["elapsed_s"] for t in ticks],
                               known(t["queue_depth"] for t in ticks), label="queue depth")),
            before=bands),
    }
    if has_figure(members, "memory_bytes"):
        figures["memory.png"] = figure(
            "memory (MiB, log scale)", "Memory per member against its high watermark (dashed; "
            "shaded: memory alarm)", with_events(lambda ax: memory_lines(ax, members)),
            before=bands)
    if has_figure(list(hosts), "cpu_percent"):
        figures["hosts.png"] = figure("CPU (% of the host, all cores)", "CPU per host",
                                      with_events(lambda ax: host_lines(ax, list(hosts))),
                                      before=bands)
    if has_figure(members, "network_in_mbps"):
        figures["network.png"] = figure(
            "client traffic (Mb/s)", "Network per member: in (solid) and out (dashed)",
            with_events(lambda ax: network_lines(ax, members)), before=bands)
    if has_figure(members, "connections"):
        figures["connections.png"] = figure(
            "client connections", "Connections per member",
            with_events(lambda ax: member_lines(ax, members, "connections")), before=bands)
    return figures


# -- runs overlaid -------------------------------------------------------------------------------


def mean_cpu_per_second(members: list[dict]) -> tuple[list[float], list[float]]:
    """The seconds and, in each, the mean CPU (% of one core) of the members running then
    (NaN where none was read)."""
    by_second: dict[float, list[float]] = defaultdict(list)
    for row in members:
        read = by_second[row["elapsed_s"]]  # every second has its entry, read or not
        if row["running"] and row.get("cpu_percent") is not None:
            read.append(row["cpu_percent"])
    seconds = sorted(by_second)
    return seconds, [fmean(by_second[s]) if by_second[s] else math.nan for s in seconds]


def compare_figures(runs: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Runs overlaid, one line (one legend entry) per run, by file name: the consumed rate over
    time (the target dashed in the run's colour), p99 against the achieved rate of each step,
    and the members' mean CPU over time. ``runs`` maps a run's label to its ``ticks``,
    ``members`` and ``steps`` (:class:`StepRow`)."""
    def rates(ax) -> None:
        for i, (name, run) in enumerate(runs.items()):
            x = [t["elapsed_s"] for t in run["ticks"]]
            ax.plot(x, known(t["receive_rate"] for t in run["ticks"]), color=f"C{i}",
                    linewidth=1, label=name)
            ax.plot(x, known(t["target_rate"] for t in run["ticks"]), color=f"C{i}",
                    linestyle="--", linewidth=1)

    def latency(ax) -> None:
        for i, (name, run) in enumerate(runs.items()):
            shown = [s for s in run["steps"] if s.achieved_rate is not None and s.p99_ms]
            ax.plot([s.achieved_rate for s in shown], [s.p99_ms for s in shown], "o-",
                    color=f"C{i}", label=name)
        ax.set_yscale("log")

    def cpu(ax) -> None:
        for i, (name, run) in enumerate(runs.items()):
            ax.plot(*mean_cpu_per_second(run["members"]), color=f"C{i}", linewidth=1,
                    label=name)
        ax.set_ylim(bottom=0)

    return {
        "compare-rate.png": figure("messages per second (msg/s)",
                                   "Consumed rate per second (dashed: target)", rates),
        "compare-latency.png": figure("p99 latency (ms)", "p99 against the achieved rate, a "
                                      "point per step", latency, xlabel="achieved rate (msg/s)"),
        "compare-cpu.png": figure("CPU (% of one core)", "Mean CPU of the running members",
                                  cpu, legend="lower left"),
    }
