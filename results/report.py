"""A run's ``analysis/`` directory: tables as JSON and CSV, PNG plots, and ``report.md``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from results.analysis import PERCENTILES, RunAnalysis
from results.steptable import fixed_width, member_index

MARKED_EVENTS = {"member_started": ("member started", "tab:green"),
                 "member_stopped": ("member stopped", "tab:purple"),
                 "fault": ("fault", "tab:red"),
                 "fault_cleared": ("fault over", "tab:orange"),
                 "member_restarted": ("member restarted", "tab:olive")}


def write(analysis: RunAnalysis, ticks: list[dict], members: list[dict], events: list[dict],
          derived: dict[str, Any]) -> Path:
    """Write every output of one run's analysis; returns the ``analysis/`` directory."""
    out = analysis.run_dir / "analysis"
    out.mkdir(exist_ok=True)
    _write_rows(out / "steps.csv", [_flat(row) for row in analysis.steps])
    _write_rows(out / "members.csv", analysis.members)
    (out / "analysis.json").write_text(json.dumps({
        "scenario": analysis.scenario, "steps": analysis.steps, "members": analysis.members,
        "cost": analysis.cost, **derived, "problems": analysis.problems}, indent=2, default=str))
    plots = _plots(out, ticks, members, events)
    (out / "report.md").write_text(_markdown(analysis, derived, plots))
    return out


def step_table_text(steps: list[dict]) -> str:
    """The step table in document 000's Table 1 shape, with full latency percentiles."""
    names = sorted({m for row in steps for m in row["cpu_percent"]})
    short = [member_index(m) for m in names]
    lines = [["step", "target msg/s", "achieved msg/s", "min msg/s", "members",
              *[f"m{s} CPU%" for s in short], "host CPU%", "balance",
              *[n.replace("_ms", "").replace("p999", "p99.9") + " ms" for n in PERCENTILES],
              "max ms", "errors", "reconnects", "max backlog"]]
    for row in steps:
        lines.append([
            row["label"], f"{row['target_rate']:,.0f}", f"{row['achieved_rate']:,.0f}",
            f"{row['min_rate']:,.0f}", str(row["members"]),
            *[_num(row["cpu_percent"].get(m), 1) for m in names],
            _num(row["host_cpu_percent"], 1), _num(row["balance"], 3),
            *[_num(row[n], 2) for n in PERCENTILES], _num(row["max_ms"], 2),
            str(row["errors"]), str(row["reconnects"]), f"{row['max_backlog']:,}"])
    return fixed_width(lines)


def _markdown(analysis: RunAnalysis, derived: dict[str, Any], plots: list[str]) -> str:
    cost = analysis.cost
    lines = [f"# {analysis.scenario}: {analysis.run_dir.name}", "",
             "## Steps", "", "```", step_table_text(analysis.steps), "```", "",
             "CPU% is of one core. Balance is Jain's index over the messages each member's "
             "queues delivered (over CPU for runs before format 2): 1 = even, 1/n = one "
             "member takes all.",
             "", "## Members", ""]
    member_lines = [["member", "mean CPU%", "max CPU%", "mean connections", "CPU share",
                     "messages delivered", "message share", "seconds serving"]]
    for m in analysis.members:
        member_lines.append([m["member"], _num(m["mean_cpu_percent"], 1),
                             _num(m["max_cpu_percent"], 1), _num(m["mean_connections"], 1),
                             f"{m['cpu_share']:.1%}", _num(m["messages_delivered"], 0),
                             "-" if m["message_share"] is None else f"{m['message_share']:.1%}",
                             str(m["seconds_serving"])])
    lines += ["```", fixed_width(member_lines), "```", "", "## Cost", "",
              f"- broker: {_num(cost.get('broker_us_per_msg'), 1)} CPU us/msg; "
              f"{_money(cost.get('broker_cost_per_1k_msg_s_month'))} per 1,000 msg/s per month",
              f"- load generator: {_num(cost.get('generator_us_per_msg'), 1)} CPU us/msg; "
              f"{_money(cost.get('generator_cost_per_1k_msg_s_month'))} per 1,000 msg/s "
              "per month",
              f"- at {cost.get('price_per_core_hour')} per core-hour, "
              f"{cost.get('messages', 0):,} messages", "", "## Timeline", ""]
    for r in derived.get("scale_outs", []):
        lines.append(f"- scale-out at {r['decision_s']:.0f} s ({r['member']}): decision after "
                     f"{r['to_decision_s']:.0f} s, serving {r['to_serving_s']:.1f} s later, "
                     f"recovered {_secs(r['to_recovered_s'])} later; total {_secs(r['total_s'])}")
    for r in derived.get("faults", []):
        lines.append(f"- {r['fault']} at {r['at_s']:.0f} s: recovered in {_secs(r['recovery_s'])}")
    b = derived.get("backlog", {})
    lines.append(f"- backlog peak {b.get('peak', 0):,} messages at {_secs(b.get('peak_at_s'))}, "
                 f"drained {_secs(b.get('drain_s'))} later")
    lines += ["", "## Plots", "", *[f"![{p}]({p})" for p in plots]]
    if analysis.problems:
        lines += ["", "## Problems", "", *[f"- {p}" for p in analysis.problems]]
    return "\n".join(lines) + "\n"


def _plots(out: Path, ticks: list[dict], members: list[dict], events: list[dict]) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if not ticks:
        return []
    t0 = next((e["t"] for e in events if e["kind"] == "step"),
              ticks[0]["t"] - ticks[0]["elapsed_s"])
    x = [t["elapsed_s"] for t in ticks]
    made = []

    def figure(name: str, ylabel: str, title: str, draw) -> None:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        draw(ax)
        for event in events:
            if event["kind"] in MARKED_EVENTS:
                label, color = MARKED_EVENTS[event["kind"]]
                ax.axvline(event["t"] - t0, color=color, linestyle="--", linewidth=1,
                           label=label)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="upper left", fontsize="small")
        ax.set_xlabel("elapsed time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        made.append(name)

    figure("rate.png", "messages per second (msg/s)", "Target, published and consumed rate",
           lambda ax: (ax.plot(x, [t["target_rate"] for t in ticks], label="target"),
                       ax.plot(x, [t["send_rate"] for t in ticks], label="published",
                               linewidth=1),
                       ax.plot(x, [t["receive_rate"] for t in ticks], label="consumed",
                               linewidth=1)))

    def cpu(ax) -> None:
        for name in sorted({m["member"] for m in members}):
            rows = [m for m in members if m["member"] == name]
            ax.plot([m["elapsed_s"] for m in rows],
                    [m["cpu_percent"] if m["running"] else None for m in rows],
                    label=name.split("@")[0])
        quotas = {m["cpu_quota_cores"] for m in members if m["cpu_quota_cores"]}
        for quota in quotas:
            ax.axhline(quota * 100, color="grey", linestyle=":", label="CPU quota")
    figure("cpu.png", "CPU (% of one core)", "CPU per member", cpu)
    figure("latency.png", "latency (ms)", "Latency per second",
           lambda ax: (ax.plot(x, [t["latency_p50_ms"] for t in ticks], label="p50"),
                       ax.plot(x, [t["latency_p99_ms"] for t in ticks], label="p99"),
                       ax.set_yscale("log")))
    figure("backlog.png", "messages queued", "Backlog",
           lambda ax: ax.plot(x, [t["queue_depth"] for t in ticks], label="queue depth"))
    return made


def _write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        if not rows:
            return
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _flat(row: dict) -> dict:
    flat = {k: v for k, v in row.items() if k not in ("cpu_percent", "delivered_per_member")}
    flat.update({f"cpu_percent[{m}]": v for m, v in row["cpu_percent"].items()})
    flat.update({f"delivered[{m}]": v for m, v in row["delivered_per_member"].items()})
    return flat


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"
