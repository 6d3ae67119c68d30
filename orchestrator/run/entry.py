"""``surge run`` below the command line: one scenario file run start to finish (load, run under
stop signals, step table, accounting, analysis) and the document ``--json`` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.agents.launcher import begin_local
from orchestrator.loading import loading
from orchestrator.run.lines import Lines
from orchestrator.run.ports import check_metrics_port
from orchestrator.specs.loader import load_scenario
from results.rundir.runid import new_run_id

if TYPE_CHECKING:
    from orchestrator.run.controller import RunResult
    from orchestrator.specs.scenario import ScenarioSpec


@dataclass(frozen=True)
class RunOptions:
    """How ``surge run`` runs a scenario (its options, see ``surge run --help``)."""

    runs_dir: Path = Path("runs")
    keep: bool = False
    live: bool = True
    metrics_port: int | None = None
    web: str | None = None
    reuse: bool = False
    analyze: bool = True


@dataclass(frozen=True)
class RunReport:
    """A finished ``surge run``: whether it completed and its ``--json`` document."""

    completed: bool
    document: dict[str, Any]


def run_file(scenario: Path, overrides: list[str], options: RunOptions, lines: Lines
             ) -> RunReport:
    """Run the scenario file (with ``--set`` ``overrides``) on its topology; its step table,
    accounting and analysis go to ``lines`` as they come.

    Agents on this machine begin as soon as the scenario is read, and start while the
    controller loads (a fifth of a second of imports); those begun and never started are
    stopped, whatever ends the run."""
    spec, topology = load_scenario(scenario, overrides, lines.warn, need_plan=True)
    check_metrics_port(options.metrics_port)
    run_id = new_run_id(spec.name)
    launcher = begin_local(spec, topology, options.runs_dir / run_id)
    try:
        with loading():  # the controller and what it drives
            from orchestrator.run.controller import Controller, stop_on_signals
        controller = Controller(spec, topology, options.runs_dir, live=options.live,
                                keep_topology=options.keep, metrics_port=options.metrics_port,
                                run_id=run_id, launcher=launcher, web=options.web,
                                reuse=options.reuse)
        with stop_on_signals(controller):
            result = controller.run()
    finally:
        if launcher is not None:
            launcher.abandon()
    return _report(result, controller.manifest.headings(), spec, options, lines)


def _report(result: RunResult, headings: list[str], spec: ScenarioSpec, options: RunOptions,
            lines: Lines) -> RunReport:
    """A finished run's step table (under ``headings``), what saturated and its accounting,
    said; analysed if asked."""
    from results.rundir.bottleneck import bottleneck_lines
    from results.rundir.steps import as_text, terms_of
    lines.say(f"\nrun {result.outcome}: {result.run_dir} (surge view {result.run_dir} shows "
              f"it again)")
    terms = terms_of(spec.workload.pattern)
    if result.steps:
        rows = result.steps + ([result.drain] if result.drain else [])
        lines.say(as_text(rows, terms, settle_s=spec.measure.settle,
                          heading="\n".join(headings) if headings else None))
        lines.say("what saturated:\n" + "\n".join(f"  {line}" for line in
                                                  bottleneck_lines(result.steps)))
    if result.accounting:
        (lines.good if result.accounting.balanced else lines.caution)(
            result.accounting.explain())
    completed = result.outcome == "completed"
    summary = None
    if options.analyze and completed:
        from results.passes import analyze_if_installed  # the analysis: loaded only to analyse
        summary = analyze_if_installed([result.run_dir], lines.say, lines.caution)
    return RunReport(completed, run_document(result, spec.name, terms.unit, summary))


def run_document(result: RunResult, scenario: str, rate_unit: str, summary=None) -> dict:
    """What ``surge run --json`` prints: a :class:`~orchestrator.run.controller.RunResult` and
    the analysis :class:`~results.pipeline.Summary` (None: not analysed) as JSON-ready data."""
    accounting = result.accounting
    return {"run_id": result.run_dir.name, "run_dir": str(result.run_dir),
            "outcome": result.outcome, "scenario": scenario, "rate_unit": rate_unit,
            "steps": [row.as_json() for row in result.steps],
            "drain": result.drain.as_json() if result.drain else None,
            "accounting": {**asdict(accounting), "explain": accounting.explain()}
            if accounting else None,
            "analysis": summary.as_dict() if summary else None}
