"""The capacity answer as people read it: per member count the sustainable rate, its latency,
the CPU it took and what the provisioned cluster costs per 1,000 msg/s per month (document
001's measure), the Universal Scalability Law fitted over the counts with its projections
(:mod:`results.usl`), and, where the counts were searched under several conditions (ideal and
adverse), each condition's rate and price side by side with how exactly its runs accounted for
their messages; as ``capacity.json``, Markdown tables and ``capacity.png``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from results import usl


@dataclass(frozen=True)
class Search:
    """One search at one member count: the rate that held (``None``: none did) and, over its
    confirmation (or, when it did not converge, its last probe of that rate that held), the
    latency, the broker's CPU (consumed, and the quota provisioned) and the
    load generator's, in cores; ``monthly`` is the provisioned cluster's price per month.
    ``probes`` are every probe's rate, achieved rate, p99 (ms) and verdict, for the curve;
    ``condition`` is what every probe was held under (``capacity.conditions``)."""

    members: int
    run_dir: str
    rate: float | None
    converged: bool
    why: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    broker_cores: float | None = None
    quota_cores: float | None = None
    generator_cores: float | None = None
    monthly: float | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    condition: str = "ideal"
    accounting: str = ""  # how exactly the search's run accounted for its messages

    @property
    def accounting_note(self) -> str:
        """The run's accounting, and the probes whose figures had readings missing."""
        missing = [p["step"] for p in self.probes if p.get("missing_seconds")]
        note = self.accounting or "not recorded"
        if missing:
            note += (f"; probe{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(map(str, missing))} of {len(self.probes)} had seconds with "
                     f"readings missing")
        return note

    @property
    def per_thousand(self) -> float | None:
        """The provisioned cluster's monthly price per 1,000 msg/s it sustains."""
        if self.monthly is None or not self.rate:
            return None
        return self.monthly / (self.rate / 1000)


def answer(searches: list[Search], target: float | None, project: list[int]) -> dict[str, Any]:
    """Everything ``capacity.json`` holds: the searches, the fit, the rate projected at each
    count of ``project`` and the members ``target`` msg/s needs (each withheld with its reason
    when the fit cannot carry it), and the cheapest measured count that sustained ``target``:
    all of the first condition's searches (ideal, usually); ``conditions``: each search's rate
    and price under its condition, first condition first."""
    first = searches[0].condition if searches else "ideal"
    fitted = [s for s in searches if s.condition == first]
    fit = usl.fit([(s.members, s.rate) for s in fitted if s.rate])
    document: dict[str, Any] = {
        "searches": [{**asdict(s), "per_thousand": s.per_thousand} for s in searches],
        "condition": first,
        "conditions": ranked(searches, target),
        "fit": {"law": asdict(fit.law) if fit.law else None, "error": fit.error,
                "unreliable": list(fit.unreliable), "notes": list(fit.notes)},
        "projections": [{"members": n, **asdict(usl.rate_at(fit, n))} for n in project],
        "target": target, "needed": None, "cheapest": None}
    if target:
        document["needed"] = asdict(usl.members_for(fit, target))
        carried = [s for s in fitted if s.rate and s.rate >= target and s.per_thousand]
        if carried:
            best = min(carried, key=lambda s: s.monthly)
            document["cheapest"] = {"members": best.members, "rate": best.rate,
                                    "monthly": best.monthly, "per_thousand": best.per_thousand}
    return document


def ranked(searches: list[Search], target: float | None) -> list[dict[str, Any]]:
    """Each search's rate and price under its condition, the conditions in the order searched
    and, within each, cheapest per 1,000 msg/s per month first (``rank``; unpriced last);
    ``passes_all``: with a ``target``, whether every search of that member count sustained it
    under every condition (document 001's "passes all"), else ``None``."""
    order = list(dict.fromkeys(s.condition for s in searches))
    passes = {n: all(s.rate is not None and s.rate >= target for s in searches
                     if s.members == n) and
              {s.condition for s in searches if s.members == n} == set(order)
              for n in {s.members for s in searches}} if target else {}
    rows: list[dict[str, Any]] = []
    for condition in order:
        mine = sorted((s for s in searches if s.condition == condition),
                      key=lambda s: (s.per_thousand is None, s.per_thousand or 0.0, s.members))
        rows += [{"condition": condition, "rank": rank, "members": s.members, "rate": s.rate,
                  "converged": s.converged, "monthly": s.monthly,
                  "per_thousand": s.per_thousand, "passes_all": passes.get(s.members),
                  "accounting": s.accounting_note} for rank, s in enumerate(mine, 1)]
    return rows


def reanswer(directory: Path, project: list[int], target: float | None
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer again from a capacity directory's recorded searches (another projection or
    target, or a newer fit), written over its files; with the SLO it was measured against."""
    path = directory / "capacity.json"
    try:
        recorded = json.loads(path.read_text())
        searches = [Search(**{k: v for k, v in s.items() if k != "per_thousand"})
                    for s in recorded["searches"]]
        slo = recorded["slo"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a capacity answer surge wrote ({exc})") from exc
    document = answer(searches, target if target is not None else recorded.get("target"),
                      project or [p["members"] for p in recorded.get("projections", [])])
    write(directory, document, slo)
    return document, slo


def _number(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "unknown" if value is None else pattern.format(value)


def knee_lines(searches: list[dict[str, Any]], condition: str) -> list[str]:
    """Per search of ``condition``, what saturated at its knee: the lowest-rate probe that
    broke the SLO (searches recorded before probes named it are left out)."""
    lines = []
    for s in searches:
        broke = [p for p in s["probes"] if not p.get("held") and p.get("bottleneck")]
        if s.get("condition", "ideal") == condition and broke:
            knee = min(broke, key=lambda p: p["rate"])
            lines.append(f"- {s['members']} members: at the knee ({knee['rate']:,.0f} msg/s "
                         f"asked, broke) {knee['bottleneck']}")
    return [""] + lines if lines else []


def as_markdown(document: dict[str, Any], slo: dict[str, Any], currency: str = "USD") -> str:
    """The answer as Markdown: the table, the fit, the projections, and the conditions side
    by side where there are several."""
    first = document.get("condition", "ideal")
    several = len({row["condition"] for row in document.get("conditions", [])}) > 1
    lines = [f"SLO: p99 <= {slo['p99'] * 1000:g} ms, backlog <= {slo['backlog']:,} messages, "
             f"loss <= {slo['loss']:,}, end-to-end rate within {slo['shortfall']:.0%} of the "
             f"target.", ""] + ([f"Under {first} conditions (the fit and projections are of "
                                 f"these searches):", ""] if several else []) + [
             "| members | sustainable msg/s | p50 ms | p99 ms | broker cores used / "
             "provisioned | generator cores | cluster per month | per 1,000 msg/s per month "
             "| probes |", "|---|---|---|---|---|---|---|---|---|"]
    for s in document["searches"]:
        if s.get("condition", "ideal") != first:
            continue
        rate = _number(s["rate"]) + ("" if s["converged"] else
                                     " (not converged: figures over its last probe that held)")
        lines.append(
            f"| {s['members']} | {rate} | {_number(s['p50_ms'], '{:.1f}')} | "
            f"{_number(s['p99_ms'], '{:.1f}')} | {_number(s['broker_cores'], '{:.2f}')} / "
            f"{_number(s['quota_cores'], '{:.2f}')} | {_number(s['generator_cores'], '{:.2f}')}"
            f" | {_number(s['monthly'], '{:,.2f} ' + currency)} | "
            f"{_number(s['per_thousand'], '{:,.2f} ' + currency)} | {len(s['probes'])} |")
    lines += knee_lines(document["searches"], first)
    fit = document["fit"]
    lines.append("")
    if fit["law"]:
        law = fit["law"]
        lines.append(f"Universal Scalability Law: {law['lam']:,.0f} msg/s per member, "
                     f"contention sigma {law['sigma']:.4f}, coherency kappa {law['kappa']:.5f}"
                     f"; RMS error {fit['error']:.1%} of the measured rates.")
    for note in fit.get("notes", []):
        lines.append(f"- {note}")
    for reason in fit["unreliable"]:
        lines.append(f"- the fit is unreliable: {reason}")
    for p in document["projections"]:
        lines.append(_projection(f"At {p['members']} members", p, "{:,.0f} msg/s"))
    if document["target"]:
        lines.append(_projection(f"To carry {document['target']:,.0f} msg/s within the SLO",
                                 document["needed"], "{:.0f} members", needs=True))
        cheapest = document["cheapest"]
        lines.append(f"Cheapest measured size that sustained it: {cheapest['members']} members,"
                     f" {cheapest['monthly']:,.2f} {currency} per month"
                     if cheapest else "No measured size sustained it.")
    if several:
        lines += ["", conditions_table(document["conditions"], document["target"], currency)]
    if document.get("price", {}).get("instance_types") or \
            document.get("price", {}).get("storage_classes"):
        lines += ["", price_table(document["price"], currency)]
    return "\n".join(lines) + "\n"


def conditions_table(rows: list[dict[str, Any]], target: float | None = None,
                     currency: str = "USD") -> str:
    """Each condition's searches ranked by price per 1,000 msg/s per month (the first
    condition first, as searched), their sustainable rate and its share of the first
    condition's at the same size, whether the size passes all conditions at ``target`` msg/s,
    and how exactly each search's run accounted for its messages."""
    first = rows[0]["condition"]
    ideal = {row["members"]: row["rate"] for row in rows if row["condition"] == first
             and row["rate"]}
    passes = f"passes all at {target:,.0f} msg/s" if target else "passes all"
    lines = [f"Each condition ranked by price per 1,000 msg/s per month ({first} first):", "",
             f"| condition | rank | members | sustainable msg/s | of {first} % | per 1,000 msg/s "
             f"per month | {passes} | accounting |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        rate = ("none held" if row["rate"] is None else _number(row["rate"])) + (
            "" if row["converged"] else " (not converged)")
        share = row["rate"] / ideal[row["members"]] * 100 \
            if row["rate"] and row["members"] in ideal else None
        verdict = "no target given" if row["passes_all"] is None else \
            "yes" if row["passes_all"] else "no"
        lines.append(f"| {row['condition']} | {row['rank']} | {row['members']} | {rate} | "
                     f"{_number(share, '{:.0f} %')} | "
                     f"{_number(row['per_thousand'], '{:,.2f} ' + currency)} | {verdict} | "
                     f"{row['accounting']} |")
    return "\n".join(lines)


def price_table(price: dict[str, Any], currency: str = "USD") -> str:
    """The price table the clusters were priced from (instance types and storage classes,
    per hour), the ones a member was priced as marked."""
    hours = price["hours_per_month"]
    lines = [f"Price table (a member is one instance and one volume; a month is {hours:g} h):",
             "",
             f"| kind | name | {currency} per hour | {currency} per month | priced as |",
             "|---|---|---|---|---|"]
    for kind, table, chosen in (("instance type", "instance_types", "instance"),
                                ("storage class", "storage_classes", "storage")):
        lines += [f"| {kind} | {name} | {hourly:,.4g} | {hourly * hours:,.2f} | "
                  f"{'yes' if name == price.get(chosen) else ''} |"
                  for name, hourly in price.get(table, {}).items()]
    return "\n".join(lines)


def _projection(what: str, p: dict[str, Any], pattern: str, needs: bool = False) -> str:
    if p["value"] is None:
        return f"{what}: not projected ({'; '.join(p['withheld'])})."
    verb = "you need" if needs else "the fit projects"
    return (f"{what}, {verb} {pattern.format(p['value'])} (90 % interval "
            f"{pattern.format(p['low'])} to {pattern.format(p['high'])}).")


def write(directory: Path, document: dict[str, Any], slo: dict[str, Any]) -> list[Path]:
    """``capacity.json``, ``report.md`` and (with matplotlib) ``capacity.png`` in
    ``directory``."""
    (directory / "capacity.json").write_text(json.dumps({**document, "slo": slo}, indent=2))
    (directory / "report.md").write_text(
        "# Capacity\n\n" + as_markdown(document, slo) + "\n![latency vs throughput, and the "
        "rate by member count](capacity.png)\n")
    written = [directory / "capacity.json", directory / "report.md"]
    try:
        from results.plots import load_plotting
        plt = load_plotting()
    except ImportError:
        return written
    written.append(_plot(plt, directory / "capacity.png", document))
    return written


def _plot(plt, path: Path, document: dict[str, Any]) -> Path:
    """Latency against the achieved rate of every probe, a colour per member count (held probes
    filled, broken ones hollow), and the sustainable rates over member counts with the fit:
    of the first condition's searches."""
    fig, (curve, scaling) = plt.subplots(1, 2, figsize=(12, 4.5))
    first = document.get("condition", "ideal")
    searches = [s for s in document["searches"] if s.get("condition", "ideal") == first]
    counts = sorted({s["members"] for s in searches})
    for n in counts:
        probes = sorted((p for s in searches if s["members"] == n
                         for p in s["probes"] if p["achieved"] and p["p99_ms"]),
                        key=lambda p: p["achieved"])
        color = f"C{counts.index(n)}"
        for held in (True, False):
            shown = [p for p in probes if p["held"] == held]
            curve.plot([p["achieved"] for p in shown], [p["p99_ms"] for p in shown], "o",
                       color=color, fillstyle="full" if held else "none",
                       label=f"{n} member{'s' if n > 1 else ''}" if held else None)
    curve.set(xlabel="achieved rate (msg/s)", ylabel="p99 latency (ms)", yscale="log",
              title="latency vs throughput of every probe (hollow: SLO broken)")
    curve.legend()
    found = [(s["members"], s["rate"]) for s in searches if s["rate"]]
    scaling.plot([n for n, _ in found], [r for _, r in found], "o", label="sustainable rate")
    law = document["fit"]["law"]
    if law:
        top = max(counts + [p["members"] for p in document["projections"]
                            if p["value"] is not None])
        xs = [1 + i * (top - 1) / 100 for i in range(101)]
        fitted = usl.Law(**law)
        scaling.plot(xs, [fitted.rate(x) for x in xs], "-", label="USL fit" + (
            " (unreliable: see report.md)" if document["fit"]["unreliable"] else ""))
        for p in document["projections"]:
            if p["value"] is not None:
                scaling.errorbar([p["members"]], [p["value"]], fmt="s",
                                 yerr=[[p["value"] - p["low"]], [p["high"] - p["value"]]],
                                 label=f"projection at {p['members']}")
    scaling.set(xlabel="members", ylabel="msg/s", title="sustainable rate by member count")
    scaling.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
