"""A run's ``analysis/`` directory: tables as JSON and CSV, PNG plots, and ``report.md``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from results.analysis import RunAnalysis
from results.plots import run_figures, save
from results.rundir.bottleneck import bottleneck_lines
from results.rundir.figures import CONFIRM, HISTOGRAM_KINDS, INTENDED, LATENCY, Percentile
from results.rundir.manifest import RunManifest
from results.rundir.steps import (
    FIGURES,
    MESSAGES,
    StepRow,
    Terms,
    cell,
    client_cells,
    client_header,
    cost_cells,
    cost_header,
    fixed_width,
    member_index,
    resource_cells,
    resource_header,
)

PERCENTILES = sorted((name for name, how in FIGURES.items()
                      if isinstance(how, Percentile) and how.histogram == LATENCY),
                     key=lambda name: FIGURES[name].q)  # the step table's latency columns
INTENDED_COLUMNS = [name for name, how in FIGURES.items()  # beside them: from intended times,
                    if isinstance(how, HISTOGRAM_KINDS)  # and publish to confirm
                    and how.histogram in (INTENDED, CONFIRM)]
INTENDED_TEXT = ("Intended p50/p99/max: latency measured from when the sender's schedule meant "
                 "each message to go rather than from when it went, so a sender that fell "
                 "behind (a stalled loop, flow control, a full write buffer) shows its delay "
                 "there and not only in the rate (no coordinated omission); messages of "
                 "rate-limited senders only (an unlimited sender has no schedule: \"-\" if "
                 "all were). Confirm p50/p99: publisher-confirm latency, from a message's "
                 "publish to the broker's confirm of it (\"-\" without confirms).")

def write(analysis: RunAnalysis, events: list[dict], derived: dict[str, Any]) -> Path:
    """Write every output of one run's analysis; returns the ``analysis/`` directory."""
    out = analysis.run_dir / "analysis"
    out.mkdir(exist_ok=True)
    unit = analysis.manifest.terms.unit
    _write_rows(out / "steps.csv", [_flat({**row.as_json(), "rate_unit": unit})
                                    for row in analysis.rows])
    _write_rows(out / "members.csv", analysis.members)
    (out / "analysis.json").write_text(json.dumps({
        "scenario": analysis.scenario, "steps": [row.as_json() for row in analysis.steps],
        "drain": analysis.drain.as_json() if analysis.drain else None,
        "settle_s": analysis.settle_s, "settle_excluded_s": analysis.settle_excluded_s,
        "members": analysis.members, "cost": analysis.cost, **derived,
        "problems": analysis.problems}, indent=2, default=str))
    plots = save(run_figures(analysis.ticks, analysis.member_samples, events,
                             analysis.manifest.phases, analysis.steps,
                             analysis.host_samples), out)
    (out / "report.md").write_text(_markdown(analysis, derived, plots))
    return out


def step_table_text(steps: list[StepRow], terms: Terms = MESSAGES) -> str:
    """The step table in document 000's Table 1 shape, in ``terms`` (round trips/s,
    requesters, responders and queue pairs for request/reply), with the clients taking part,
    each row's CPU cost per message (round trip), full latency percentiles (and from the
    intended send times: :data:`INTENDED_TEXT`), each broker host's CPU beside the controller
    host's, skipped sends, and the span of seconds each row covers; "-" is a figure no source
    gave, a target of 0 "max" (but for the drain)."""
    names = sorted({m for row in steps for m in row.cpu_percent})
    hosts = sorted({h for row in steps for h in row.hosts_cpu_percent})
    unit = terms.unit
    lines = [["step", "span s", *client_header(terms), f"target {unit}", f"achieved {unit}",
              f"min {unit}", "members", *[f"m{member_index(m)} CPU%" for m in names],
              "host CPU%", *[f"{h} CPU%" for h in hosts], *cost_header(terms), "balance",
              *[n.replace("_ms", "").replace("p999", "p99.9") + " ms" for n in PERCENTILES],
              "max ms", *[n.replace("_ms", "").replace("_", " ") + " ms" for n in INTENDED_COLUMNS],
              "skipped", "errors", "reconnects", "max backlog", *resource_header(steps)]]
    for row in steps:
        lines.append([
            row.label, f"{row.start_s:.0f}-{row.end_s:.0f}", *client_cells(row),
            _num(row.target_rate, 0) if row.target_rate or row.label == "drain"
            else "max", _num(row.achieved_rate, 0), _num(row.min_rate, 0),
            str(row.members), *[_num(row.cpu_percent.get(m), 1) for m in names],
            _num(row.host_cpu_percent, 1), *[_num(row.hosts_cpu_percent.get(h), 1) for h in hosts],
            *cost_cells(row), _num(row.balance, 3),
            *[_num(getattr(row, n), 2) for n in PERCENTILES],
            _num(row.max_ms, 2), *[_num(getattr(row, n), 2) for n in INTENDED_COLUMNS],
            f"{row.skipped:,}", str(row.errors), str(row.reconnects),
            _num(row.max_backlog, 0), *resource_cells(steps, row)])
    return fixed_width(lines)


def coverage_text(analysis: RunAnalysis) -> str:
    """Which seconds the step table's rows cover, what was left out as settle, and the
    seconds a source was missing."""
    missing = sum(row.missing_seconds for row in analysis.rows)
    return (f"Each row covers its span of seconds since the start ((from, to]): a step's "
            f"seconds, split where the number of serving members changed, without the first "
            f"{analysis.settle_s:g} s of each part (settle: {analysis.settle_excluded_s} "
            f"seconds left out in all)"
            + ("; the drain row covers the seconds after the last step, while the receivers "
               "emptied the queues" if analysis.drain else "")
            + ". Rates are means over the seconds whose figures are known; latency "
            "percentiles come from the merged histograms of those seconds"
            + (f"; {missing} seconds had a source missing its deadline (\"-\" = unknown)"
               if missing else "") + ".")


def balance_text(steps: list[StepRow]) -> list[str]:
    """A line per row whose members' figures were unknown in some seconds: the balance is
    over known readings only."""
    lines = []
    for row in steps:
        if not row.unknown_per_member:
            continue
        who = ", ".join(f"member {member_index(m)} unknown in {n}"
                        for m, n in row.unknown_per_member.items())
        lines.append(f"- step {row.label}: balance over {row.balance_seconds} of "
                     f"{row.seconds} seconds; {who}"
                     + ("; no balance while a member is unknown throughout"
                        if row.balance is None else ""))
    return lines


def measurements_text(manifest: RunManifest, derived: dict[str, Any]) -> list[str]:
    """Whether the run's own measurements can be trusted: suspect samples, skipped sends,
    and how late the ticks and how old the queue depths were (runs of format 3 on)."""
    lines = []
    if "suspect_samples" in derived:
        lines.append(f"- {derived['suspect_samples']['line']}")
    lines.append(f"- skipped sends: {derived.get('skipped_sends', 0):,} (sends a stalled "
                 "sender could not make up)")
    sampling = manifest.sampling
    if sampling:
        late, age = sampling.tick_lateness_s, sampling.depth_age_s
        lines.append(f"- sampling: tick lateness p50 {_secs(late.p50, 3)}, p99 "
                     f"{_secs(late.p99, 3)}, max {_secs(late.max, 3)} over "
                     f"{late.count:,} ticks (deadline {_secs(sampling.deadline_s, 1)}); "
                     f"{sampling.ticks_skipped:,} ticks skipped; queue depth age p50 "
                     f"{_secs(age.p50, 3)}, max {_secs(age.max, 3)}")
    lines += [f"- not measured: {figure} ({why})" for figure, why in manifest.unmeasured.items()]
    if manifest.accounting and manifest.accounting.explain:
        details = manifest.accounting_details
        lines.append(f"- accounting: {manifest.accounting.explain}; nacked counts messages, "
                     f"each once; published again {details.get('republished', 0):,} times, "
                     f"{details.get('nacks_republished', 0):,} of them after a nack")
        lines += [f"- subscription {queue}: " + ", ".join(f"{name} {count:,}" for name, count
                                                        in figures.items())
                  for queue, figures in manifest.accounting.subscriptions.items()]
        said = [f"{what} {details[name]:,}" for name, what in (
            ("unroutable", "unroutable (no queue bound for their key)"),
            ("returned", "returned to their senders (mandatory)"),
            ("rereads", "read again from a stream (not duplicates)"),
            ("requeued", "nacked back to their queue by receivers (deliveries)"),
            ("rejected", "nacked without requeue, dropped by the broker"),
            ("committed", "published in committed transactions"))
            if details.get(name)]
        if said:
            lines.append("- messages " + "; ".join(said))
    return lines


def backlog_tests_text(manifest: RunManifest) -> list[str]:
    """A line per backlog test (a plan step with ``backlog``): built, drained, at what rate,
    or which part its step's hold cut short."""
    lines = []
    for test in manifest.backlogs:
        built = f"built ({test.built_messages:,} messages) in {_secs(test.build_s)}" \
            if test.build_s is not None else "not built within the step"
        drained = f"drained ({test.drain_ratio:.0%}) in {_secs(test.drain_s)} at " \
                  f"{_num(test.drain_rate, 0)} msg/s received, senders at " \
                  f"{test.publish_ratio:g}x the step's rate" if test.drain_s is not None \
            else "not drained within the step" if test.build_s is not None else ""
        lines.append(f"- backlog test of step {test.step}: {test.target_messages:,} messages "
                     f"{built}" + (f"; {drained}" if drained else ""))
    return lines


def headings_text(manifest: RunManifest) -> list[str]:
    """The step table's first lines (:meth:`RunManifest.headings`: the broker, an emulator
    above all, and whether the agents ran the AMQP fast path), as paragraphs."""
    return [line for heading in manifest.headings() for line in (heading + ".", "")]


def caveats_text(manifest: RunManifest) -> list[str]:
    """What a reader must know before the figures, as lines for the top of the report: a run
    that ended before its plan did (and why), members it did not start, agents it lost."""
    lines = []
    if manifest.outcome != "completed":
        why = manifest.interruption
        lines.append(f"**{(manifest.outcome or 'unfinished').upper()}**"
                     + (f": {why.reason}" if why else "")
                     + (f"; the figures stop at second {why.last_second_s:.0f}"
                        if why and why.last_second_s is not None else "") + ".")
    if manifest.reused:
        lines.append(f"Ran on {len(manifest.reused.members)} members already running "
                     f"({manifest.reused.why}).")
    for agent in manifest.agents_lost:
        lines.append(f"Load agent {agent['agent']} on {agent['host']} was lost at "
                     f"{agent['lost_at_s']:.0f} s with its {agent['senders']} senders and "
                     f"{agent['receivers']} receivers: the steps after it are measured "
                     f"without them, and what it did after its last reading is unknown.")
    return [*lines, ""] if lines else []


def _markdown(analysis: RunAnalysis, derived: dict[str, Any], plots: list[str]) -> str:
    cost = analysis.cost
    lines = [f"# {analysis.scenario}: {analysis.run_dir.name}", "",
             *caveats_text(analysis.manifest),
             "## Steps", "", *headings_text(analysis.manifest),
             "```", step_table_text(analysis.rows, analysis.manifest.terms), "```", "",
             coverage_text(analysis), "", INTENDED_TEXT, "",
             "CPU% is of one core; host CPU% is the controller's host, others are broker "
             "hosts. Balance is Jain's index over the rate at which each member's queues "
             "delivered messages (over CPU for runs before format 2), from known readings "
             "only: 1 = even, 1/n = one member takes all.",
             *balance_text(analysis.rows), "",
             "What saturated in each step (member CPU at its quota, the load generator's CPU, "
             "publishers blocked by an alarm, receivers or the broker's intake behind, a "
             "host at its cores; "
             "\"none visible\": none of these):", "",
             *[f"- {line}" for line in bottleneck_lines(analysis.steps)],
             "", "## Measurements", "", *measurements_text(analysis.manifest, derived),
             "", "## Members", ""]
    member_lines = [["member", "mean CPU%", "max CPU%", "mean connections", "CPU share",
                     "messages delivered", "message share", "seconds serving"]]
    for m in analysis.members:
        member_lines.append([m["member"], _num(m["mean_cpu_percent"], 1),
                             _num(m["max_cpu_percent"], 1), _num(m["mean_connections"], 1),
                             _share(m["cpu_share"]), _num(m["messages_delivered"], 0),
                             _share(m["message_share"]), str(m["seconds_serving"])])
    unknown = [f"- {m['member']}: CPU unknown in {m.get('cpu_unknown_s') or 0} of "
               f"{m['seconds_serving']} seconds serving, its message count in "
               f"{m.get('messages_unknown_s') or 0}" for m in analysis.members
               if m.get("cpu_unknown_s") or m.get("messages_unknown_s")]
    lines += ["```", fixed_width(member_lines), "```"]
    if unknown:
        lines += ["", "Shares are of the known readings only.", *unknown]
    terms = analysis.manifest.terms
    by_host = cost.get("host_us_per_msg") or {}
    hosts = ["- by host, everything on it: " + ", ".join(
        f"{host} {_num(us, 1)}" for host, us in sorted(by_host.items()))
        + f" CPU us/{terms.each}"] if by_host else []
    lines += ["", "## Cost", "", _broker_cost_line(cost, terms),
              f"- load generator: {_num(cost.get('generator_us_per_msg'), 1)} CPU "
              f"us/{terms.each}; {_money(cost.get('generator_cost_per_1k_msg_s_month'))} per "
              f"1,000 {terms.unit} per month", *hosts,
              f"- at {cost.get('price_per_core_hour')} per core-hour, "
              f"{cost.get('messages', 0):,} {terms.counted} received "
              + ("over the whole run, drain included" if cost.get("include_drain") or
                 not cost.get("span_s") else
                 f"over seconds {cost['span_s'][0]:.0f}-{cost['span_s'][1]:.0f} (the steps; "
                 "surge analyze --include-drain counts the drain too)"),
              "", "## Timeline", ""]
    for r in derived.get("scale_outs", []):
        lines.append(f"- scale-out at {r['decision_s']:.0f} s ({r['member']}): decision after "
                     f"{r['to_decision_s']:.0f} s, serving {r['to_serving_s']:.1f} s later, "
                     f"recovered {_secs(r['to_recovered_s'])} later; total {_secs(r['total_s'])}")
    for r in derived.get("faults", []):
        what = f"{r['fault']} ({r['member']})" if r.get("member") else r["fault"]
        lines.append(f"- {what} at {r['at_s']:.0f} s: recovered in {_secs(r['recovery_s'])}"
                     + (f", nothing received for {_secs(r['receive_gap_s'])}"
                        if r.get("receive_gap_s") else "")
                     + (f", publishers blocked for {_secs(r['blocked_s'])}"
                        if r.get("blocked_s") else ""))
    lines += backlog_tests_text(analysis.manifest)
    b = derived.get("backlog", {})
    lines.append(f"- backlog peak {b.get('peak', 0):,} messages at {_secs(b.get('peak_at_s'))}, "
                 f"drained {_secs(b.get('drain_s'))} later")
    lines += ["", "## Plots", "", *[f"![{p}]({p})" for p in plots]]
    if analysis.problems:
        lines += ["", "## Problems", "", *[f"- {p}" for p in analysis.problems]]
    return "\n".join(lines) + "\n"


def _write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        if not rows:
            return
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _flat(row: dict) -> dict:
    """One CSV row: a figure per member or host (a dict) becomes a column per name."""
    flat = {}
    for key, value in row.items():
        if isinstance(value, dict):
            flat.update({f"{key}[{name}]": v for name, v in value.items()})
        else:
            flat[key] = value
    return flat


def _broker_cost_line(cost: dict[str, Any], terms: Terms) -> str:
    if cost.get("broker_us_per_msg") is None:
        return ("- broker: cost unknown (no member CPU readings: the topology does not report "
                "them, or no message was received)")
    return (f"- broker: {_num(cost['broker_us_per_msg'], 1)} CPU us/{terms.each}; "
            f"{_money(cost.get('broker_cost_per_1k_msg_s_month'))} per 1,000 {terms.unit} "
            "per month")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int) -> str:
    """A figure with ``digits`` decimals and thousands separators, "-" when unknown."""
    return cell(value, f",.{digits}f")


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _secs(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f} s"
