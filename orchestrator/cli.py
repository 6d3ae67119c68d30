"""The ``surge`` command line: thin commands over the controller, provisioners and agents.

Domain errors (:class:`orchestrator.errors.SurgeError`) become one red line and an exit code here,
and nowhere else.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from drivers.http import IDLE_TIMEOUT_S, MAX_CONNECTIONS
from orchestrator import environment
from orchestrator.errors import SurgeError
from orchestrator.run.exposition import DEFAULT_METRICS_PORT
from orchestrator.specs.limits import MAX_PRICE_PER_CORE_HOUR

HELP = f"""Live load generation for message brokers: provision a cluster, ramp load through real
clients, watch it live, and get a run directory and a step table.

\b
Examples:
  surge validate scenarios/quickstart.yaml
  surge run scenarios/quickstart.yaml --set workload.senders=50
  surge run scenarios/quickstart.yaml --no-live --json > result.json
  surge analyze --compare
  surge compare runs/*-uniform-* --json | jq '.[].achieved_rate'
  surge campaign campaigns/smoke.yaml
  surge status topologies/local-3.yaml --json
  surge --install-completion

While a run runs, its figures are on http://127.0.0.1:{DEFAULT_METRICS_PORT}/metrics for
Prometheus (--metrics-port moves it; file-based service discovery: see the README).
"""

app = typer.Typer(
    help=HELP, epilog=environment.help_text(),
    no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False)

MIN_WATCH_S = 1.0
"""Shortest pause between two passes of ``surge analyze --watch``."""

JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document on stdout and nothing else there (other lines go "
                   "to stderr)")]
MetricsPortOption = Annotated[int | None, typer.Option(
    help=f"Port of the controller's Prometheus /metrics on 127.0.0.1 [default: "
         f"{DEFAULT_METRICS_PORT}, or any free port with a note when that is taken; 0 = any "
         f"free port; a port given here and taken is an error]", show_default=False)]

WebOption = Annotated[str, typer.Option(
    help="Serve the live page (rates, CPU against quota, depth, latency, steps, events) on "
         "HOST:PORT, port 0 for any free one; 'off' for none. Off loopback the printed URL "
         "carries the run's token, which every request for data must give.")]


def _web(address: str) -> str | None:
    """``--web`` checked (None: off)."""
    if address.lower() == "off":
        return None
    from orchestrator.web.server import parse_address
    parse_address(address)
    return address


TopologyArg = Annotated[Path, typer.Argument(help="Topology YAML, e.g. topologies/local-3.yaml")]
SetOption = Annotated[list[str], typer.Option(
    "--set", help="Override a field, e.g. --set workload.senders=50 or "
                  "--set topology.cpu_per_member=1 (validated like the file).")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version
        try:
            typer.echo(f"surge {version('surge')}")
        except PackageNotFoundError:
            typer.echo("surge (not installed: no version recorded)")
        raise typer.Exit()


@app.callback()
def main(_version_flag: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print surge's version and exit")] = False) -> None:
    """Live load generation for message brokers (see surge --help)."""


def _say(json_output: bool):
    """Where human lines go: stdout, or stderr when stdout carries the JSON document."""
    return functools.partial(typer.echo, err=json_output)


def _print_json(document, one_line: bool = False) -> None:
    """``document`` as JSON on stdout (indented, or on ``one_line``): paths as strings, NaN and
    infinities as null."""
    typer.echo(json.dumps(_json_ready(document), indent=None if one_line else 2, default=str,
                          allow_nan=False))


def _json_ready(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def _warn(line: str) -> None:
    """A spec's warning: one yellow line on stderr."""
    typer.secho(line, fg=typer.colors.YELLOW, err=True)


def _surge_errors(command):
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except SurgeError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            raise typer.Exit(error.exit_code) from None
    return wrapper


@app.command()
@_surge_errors
def validate(files: Annotated[list[Path], typer.Argument(
                 help="Topology, scenario or campaign YAML files")],
             overrides: SetOption = None,
             ) -> None:
    """Check spec files without running anything; every problem is listed with file and line.
    A campaign is checked with every scenario it names under every combination of its matrix.
    --set applies to each scenario or topology as in surge run or surge up. What is valid but
    probably not meant (a fault after the plan ends, a step no longer than measure.settle) is
    a warning line on stderr; warnings alone exit 0."""
    from orchestrator.errors import SpecError
    from orchestrator.specs.kinds import load_any
    failed = 0
    for path in files:
        try:
            spec = load_any(path, overrides or [], _warn)
            typer.echo(f"{path}: ok ({type(spec).__name__.removesuffix('Spec').lower()})")
        except SpecError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            failed += 1
    if failed:
        raise typer.Exit(2)


@app.command()
@_surge_errors
def run(scenario: Annotated[Path, typer.Argument(help="Scenario YAML, e.g. "
                                                      "scenarios/quickstart.yaml")],
        overrides: SetOption = None,
        runs_dir: Annotated[Path, typer.Option(help="Where run directories go")] = Path("runs"),
        keep: Annotated[bool, typer.Option(
            help="Leave a topology this run started up afterwards")] = False,
        live: Annotated[bool, typer.Option(
            help="Live terminal view (on stderr); --no-live still says the page's URL, a "
                 "moved metrics port and errors")] = True,
        metrics_port: MetricsPortOption = None,
        web: WebOption = "127.0.0.1:0",
        analyze: Annotated[bool, typer.Option(
            help="Analyse the run with Spark at the end (report.md, plots; needs the analysis "
                 "extra, skipped without it)")] = True,
        reuse: Annotated[bool, typer.Option(
            help="Run on members that a run which died left running (refused otherwise); they "
                 "are stopped at the end unless --keep")] = False,
        json_output: JsonOption = False,
        ) -> None:
    """Run a scenario: provision (or reuse) its topology, drive the plan, print the step table.

    One run holds a topology at a time: a second one is refused, naming the first and its PID.
    Members that surge up started, or a run kept with --keep, are used as they are.

    Ctrl-C, SIGTERM or SIGHUP once stops early and cleanly (senders stop, a short drain, the
    accounting, teardown; the run directory is complete); a second one forces.
    With --json, stdout holds one document: run_id, run_dir, outcome, scenario, rate_unit,
    steps, drain, accounting and analysis (surge analyze's summary, or null).
    """
    from orchestrator.run.controller import Controller, stop_on_signals
    from orchestrator.run.exposition import check_metrics_port
    from orchestrator.specs.loader import load_scenario
    from results.rundir.steps import as_text
    say = _say(json_output)
    spec, topology = load_scenario(scenario, overrides or [], _warn)
    if not spec.plan:
        from orchestrator.errors import Problem, SpecError
        raise SpecError(str(scenario), [Problem("plan", "no steps to run: this scenario is for "
                                                        "surge capacity")])
    check_metrics_port(metrics_port)
    controller = Controller(spec, topology, runs_dir, live=live, keep_topology=keep,
                            metrics_port=metrics_port, web=_web(web), reuse=reuse)
    with stop_on_signals(controller):
        result = controller.run()
    say(f"\nrun {result.outcome}: {result.run_dir} (surge view {result.run_dir} shows it "
        f"again)")
    rate_unit = "round trips/s" if spec.workload.pattern == "request-reply" else "msg/s"
    if result.steps:
        rows = result.steps + ([result.drain] if result.drain else [])
        fast_path = controller.manifest.fast_path
        say(as_text(rows, rate_unit, settle_s=spec.measure.settle,
                    heading=fast_path.line() if fast_path else None))
    if result.accounting:
        color = typer.colors.GREEN if result.accounting.balanced else typer.colors.YELLOW
        typer.secho(result.accounting.explain(), fg=color, err=json_output)
    summary = None
    if analyze and result.outcome == "completed":
        from results.installed import analysis_missing
        from results.pipeline import analyze as analyze_runs
        if why := analysis_missing():
            typer.secho(f"analysis skipped: {why}", fg=typer.colors.YELLOW, err=json_output)
        else:
            say("analysing with Spark (--no-analyze skips this) ...")
            summary = analyze_runs([result.run_dir], say=say)
    if json_output:
        _print_json(run_document(result, spec.name, rate_unit, summary))
    if result.outcome != "completed":
        raise typer.Exit(1)


def run_document(result, scenario: str, rate_unit: str, summary=None) -> dict:
    """What ``surge run --json`` prints: a :class:`~orchestrator.run.controller.RunResult` and
    the analysis :class:`~results.pipeline.Summary` (None: not analysed) as JSON-ready data."""
    from dataclasses import asdict
    accounting = result.accounting
    return {"run_id": result.run_dir.name, "run_dir": str(result.run_dir),
            "outcome": result.outcome, "scenario": scenario, "rate_unit": rate_unit,
            "steps": [asdict(row) for row in result.steps],
            "drain": asdict(result.drain) if result.drain else None,
            "accounting": {**asdict(accounting), "explain": accounting.explain()}
            if accounting else None,
            "analysis": summary.as_dict() if summary else None}


def _counts(text: str | None) -> list[int] | None:
    """``1,2,4`` as member counts (None when not given)."""
    if text is None:
        return None
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise typer.BadParameter(f"expected member counts like 1,2,4 (got {text!r})")
    return counts


@app.command()
@_surge_errors
def capacity(scenario: Annotated[Path, typer.Argument(help="Scenario YAML with an slo and a "
                                                           "capacity section, e.g. "
                                                           "scenarios/capacity-local.yaml")],
             overrides: SetOption = None,
             members: Annotated[str | None, typer.Option(
                 help="Member counts to search, e.g. 1,2,4 [default: capacity.members, else 1 "
                      "to the topology's members]", show_default=False)] = None,
             repeat: Annotated[int | None, typer.Option(
                 min=1, max=10, help="Searches per member count (the fit's interval needs 2 "
                                     "or more) [default: capacity.repeat]",
                 show_default=False)] = None,
             project: Annotated[str | None, typer.Option(
                 help="Member counts to project the rate at, e.g. 12 [default: twice the "
                      "largest count searched]", show_default=False)] = None,
             target: Annotated[float | None, typer.Option(
                 help="A total msg/s to carry: the answer names the members it needs and the "
                      "cheapest measured size [default: capacity.target]",
                 show_default=False)] = None,
             runs_dir: Annotated[Path, typer.Option(help="Where the capacity directory goes")]
             = Path("runs"),
             live: Annotated[bool, typer.Option(help="Live terminal view (on stderr)")] = True,
             analyze: Annotated[bool, typer.Option(
                 help="Analyse the searches' runs with Spark at the end (the results lake; "
                      "needs the analysis extra)")] = True,
             web: WebOption = "127.0.0.1:0",
             json_output: JsonOption = False,
             ) -> None:
    """Find the highest total rate the topology holds within the scenario's SLO, per member
    count, and project it with the Universal Scalability Law.

    Each search is a run of its own (in one capacity directory): probes double the rate while
    the SLO holds, then bisect to within capacity.precision (4 %), each held long enough for
    the allowed backlog to build up 4 % over capacity, with a pause for the queues to drain
    between probes; the rate found is confirmed by a hold of its own. The answer (table, fit,
    projections, cost per 1,000 msg/s per month of the provisioned cluster) is printed and
    written as report.md, capacity.json and capacity.png. Ctrl-C stops the search in hand and
    the rest.
    """
    from orchestrator.capacity.runner import search_all
    from orchestrator.specs.capacity import CapacitySpec
    from orchestrator.specs.loader import load_scenario
    from results.capacity import as_markdown
    say = _say(json_output)
    spec, topology = load_scenario(scenario, overrides or [], _warn)
    section = spec.capacity or CapacitySpec()
    changes = {k: v for k, v in (("members", _counts(members)), ("repeat", repeat)) if v}
    spec = spec.model_copy(update={"capacity": section.model_copy(update=changes)})
    result = search_all(spec, topology, str(scenario), runs_dir, say, live=live,
                        project=_counts(project), target=target, web=_web(web))
    say(f"\ncapacity: {result.directory}")
    say(as_markdown(result.document, spec.slo.model_dump(mode="json")))
    if analyze and result.searches:
        from results.installed import analysis_missing
        from results.pipeline import analyze as analyze_runs
        if why := analysis_missing():
            typer.secho(f"analysis skipped: {why}", fg=typer.colors.YELLOW, err=json_output)
        else:
            say("analysing with Spark (--no-analyze skips this) ...")
            analyze_runs([Path(s.run_dir) for s in result.searches], say=say)
    if json_output:
        _print_json({"directory": str(result.directory), **result.document,
                     "complete": result.complete})
    if not result.complete:
        raise typer.Exit(1)


@app.command("capacity-report")
@_surge_errors
def capacity_report(directory: Annotated[Path, typer.Argument(
                        help="A capacity directory surge capacity wrote, e.g. "
                             "runs/20261123T185502Z-capacity-uniform-cluster-capacity")],
                    project: Annotated[str | None, typer.Option(
                        help="Member counts to project the rate at, e.g. 12,16 [default: the "
                             "ones the answer had]", show_default=False)] = None,
                    target: Annotated[float | None, typer.Option(
                        help="A total msg/s to carry [default: the answer's]",
                        show_default=False)] = None,
                    json_output: JsonOption = False) -> None:
    """Answer again from the searches a capacity directory recorded, without running them:
    other projections or another target. Rewrites its report.md, capacity.json and
    capacity.png."""
    from orchestrator.errors import FileError
    from results.capacity import as_markdown, reanswer
    try:
        document, slo = reanswer(directory, _counts(project) or [], target)
    except ValueError as error:
        raise FileError(str(error)) from None
    if json_output:
        _print_json({"directory": str(directory), **document})
    else:
        typer.echo(as_markdown(document, slo))


@app.command()
@_surge_errors
def view(run_dir: Annotated[Path, typer.Argument(help="A run directory, e.g. runs/<run id>")],
         web: WebOption = "127.0.0.1:0") -> None:
    """Serve the page of a recorded run (the live page, from the run directory's rows, events,
    steps and accounting, with its analysis plots) until Ctrl-C."""
    import contextlib
    import threading

    from orchestrator.web.feed import Board
    from orchestrator.web.recorded import recorded_feed
    from orchestrator.web.server import serving
    address = _web(web)
    if address is None:
        raise typer.BadParameter("surge view needs an address to serve on", param_hint="--web")
    board = Board(run=recorded_feed(run_dir))
    with serving(board, address, typer.echo), contextlib.suppress(KeyboardInterrupt):
        typer.echo(f"showing {run_dir} until Ctrl-C")
        threading.Event().wait()


@app.command("plan")
@_surge_errors
def plan_(scenario: Annotated[Path, typer.Argument(
              help="Scenario YAML, e.g. scenarios/mq-uniform-cluster-scaling.yaml")],
          overrides: SetOption = None) -> None:
    """Print everything a run would do, in order, without touching anything: files and
    commands per host (MQ uniform cluster), manifests (Native HA), members and queues
    (RabbitMQ), then the load plan, consumer profile, faults and scaling rules."""
    from orchestrator.run.dryrun import plan_text
    from orchestrator.specs.loader import load_scenario
    spec, topology = load_scenario(scenario, overrides or [], _warn)
    typer.echo(plan_text(spec, topology), nl=False)


@app.command()
@_surge_errors
def compare(runs: Annotated[list[Path], typer.Argument(
                help="Run directories, e.g. runs/*-uniform-*")],
            json_output: JsonOption = False) -> None:
    """Compare finished runs at their final step: target and achieved msg/s, members, CPU%.

    The shape of document 000's Table 2, e.g. the scaling test against its fixed-rate variants.
    With --json, a list with one object per run (run_dir, test, target_rate, achieved_rate,
    members, member_cpu_percent_mean, host_cpu_percent, p99_ms, accounting; null = unknown).
    """
    from results.compare import as_text, final_rows
    if json_output:
        _print_json(final_rows(runs))
    else:
        typer.echo(as_text(runs))


@app.command()
@_surge_errors
def analyze(runs: Annotated[list[Path] | None, typer.Argument(
                help="Run directories (default: every run under --runs-dir)")] = None,
            runs_dir: Annotated[Path, typer.Option(help="Where runs are")] = Path("runs"),
            force: Annotated[bool, typer.Option(
                help="Analyse again even runs that have not changed")] = False,
            price_per_core_hour: Annotated[float, typer.Option(
                min=0, max=MAX_PRICE_PER_CORE_HOUR,
                help="Price of one core for one hour, for cost per 1,000 msg/s per month")]
            = 0.04,
            spark_master: Annotated[str | None, typer.Option(
                help="Spark master URL (default: $SURGE_SPARK_MASTER or local[*])")] = None,
            watch: Annotated[str | None, typer.Option(
                help="Keep analysing new runs every interval, e.g. 5m (at least 1s)")] = None,
            compare: Annotated[bool, typer.Option(
                "--compare", help="Then compare the runs: mean, stdev, min, max, change % per "
                                  "figure, and a ranking by cost among runs that met target")]
            = False,
            include_drain: Annotated[bool, typer.Option(
                "--include-drain", help="Count the drain (before the first step and after the "
                                        "last) in the cost; with --force for analysed runs")]
            = False,
            json_output: JsonOption = False,
            ) -> None:
    """Analyse runs with Spark: step table with merged-histogram latency percentiles, members
    and balance, cost per message, scale-out reaction times, report.md and PNG plots in
    <run>/analysis/. Only new or changed runs are analysed; a bad run is reported and skipped.
    Spark's own log goes to spark.log in the runs' directory, not to the console. Needs
    surge's analysis extra (pip install 'surge[analysis]') and Java 17 or later.

    With --json, stdout holds one document: analysed, reports, up_to_date, failed (run: why),
    problems, seconds, and with --compare statistics and ranking; with --watch, one such
    document per pass, each on one line.
    """
    from orchestrator.specs.units import parse_duration
    from results.catalog import run_dirs
    from results.pipeline import analyze as analyze_runs
    try:
        interval = parse_duration(watch) if watch is not None else None
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--watch") from None
    if interval is not None and interval < MIN_WATCH_S:
        raise typer.BadParameter(f"at least {MIN_WATCH_S:g}s between passes (got {watch!r})",
                                 param_hint="--watch")
    say = _say(json_output)
    while True:
        dirs = list(runs) if runs else run_dirs(runs_dir)
        summary = analyze_runs(dirs, price_per_core_hour, force, say, spark_master,
                               include_drain)
        say(f"analysed {len(summary.analysed)}, up to date {len(summary.skipped)}, "
            f"failed {len(summary.failed)} in {summary.seconds:.1f} s")
        document = summary.as_dict()
        if compare:
            from results.compare import (
                ranking_rows,
                ranking_text,
                statistics_rows,
                statistics_text,
            )
            if json_output:
                document.update(statistics=statistics_rows(dirs), ranking=ranking_rows(dirs))
            else:
                typer.echo("\n" + statistics_text(dirs) + "\n\n" + ranking_text(dirs))
        if json_output:
            _print_json(document, one_line=interval is not None)
        if interval is None:
            if summary.failed:
                raise typer.Exit(1)
            return
        force = False
        time.sleep(interval)


@app.command()
@_surge_errors
def query(sql: Annotated[str, typer.Argument(
              help="Spark SQL over the lake's tables: runs, steps, members, latency, cost, "
                   "events")],
          runs_dir: Annotated[Path, typer.Option(help="The runs root whose lake to read")]
          = Path("runs"),
          csv_output: Annotated[bool, typer.Option("--csv", help="Print CSV, not a table")]
          = False,
          spark_master: Annotated[str | None, typer.Option(
              help="Spark master URL (default: $SURGE_SPARK_MASTER or local[*])")] = None,
          ) -> None:
    """Ask the results lake your own question with Spark SQL: every run surge analyze has
    seen under --runs-dir, one view per table (columns in README, "The results lake").

    For example, the runs that lost nothing, cheapest per 1,000 msg/s first:

      surge query "SELECT run_id, broker_cost_per_1k_msg_s_month AS cost
        FROM runs JOIN cost USING (run_id) WHERE lost = 0 ORDER BY cost"
    """
    from results.installed import require_analysis
    from results.query import as_csv, as_text
    from results.query import query as run_query
    require_analysis()
    columns, rows = run_query(runs_dir, sql, spark_master)
    typer.echo(as_csv(columns, rows) if csv_output else as_text(columns, rows),
               nl=not csv_output)


@app.command()
@_surge_errors
def campaign(file: Annotated[Path, typer.Argument(help="Campaign YAML, e.g. "
                                                       "campaigns/smoke.yaml")],
             campaigns_dir: Annotated[Path, typer.Option(
                 help="Where campaign directories go: <dir>/<campaign name>/<cell id>/")]
             = Path("campaigns-runs"),
             analyze: Annotated[bool, typer.Option(
                 help="Analyse the done cells with Spark at the end; the comparison and the "
                      "ranking need it")] = True,
             price_per_core_hour: Annotated[float | None, typer.Option(
                 help="Price of one core for one hour, for the cost ranking (default: the "
                      "campaign's price_per_core_hour, else surge analyze's)")] = None,
             metrics_port: MetricsPortOption = None,
             web: WebOption = "127.0.0.1:0",
             ) -> None:
    """Run a campaign: a matrix of scenarios x parameters x repetitions, each cell one run,
    ending in a comparison and a ranking by cost among the runs that met the requirement.

    A cell is one run of one scenario with some overrides: every entry of the file's
    `cells` (a scenario, `set` overrides for all its cells, a `matrix` of override values)
    gives one cell per combination of its matrix values, `repetitions` times. Its id, e.g.
    003-quickstart-members=5,size=2KiB-r1, is its run directory under the campaign directory.
    Cells run grouped by topology: each topology is brought up before its cells, restarted
    between them if a cell left it changed, and torn down after them. For example:

      name: smoke                 # the campaign directory's name
      repetitions: 2
      requirement: {rate_within: 5%, lossless: true}   # each run passes or fails
      cells:
        - scenario: ../scenarios/quickstart.yaml       # relative to this file
          set: {plan.0.hold: 5s}
          matrix: {topology.members: [3, 5], workload.message.size: [2KiB, 20KiB]}

    Resuming: run the same command again. Cells whose run completed are kept, not run again
    (so once all are done it only prints the summary); a cell left interrupted or failed has
    its directory renamed to <cell id>.attempt-<n> and runs again. Nothing is deleted.
    campaign.json in the campaign directory holds every cell's status and verdict.

    Ctrl-C once ends the running cell cleanly and starts no further one; twice forces. The
    topology is torn down either way. Exit status: 0 when every cell is done (passing the
    requirement or not), 1 when a cell failed to run, 130 when stopped by Ctrl-C.
    """
    from orchestrator.campaign.runner import run_campaign
    from orchestrator.run.exposition import check_metrics_port
    check_metrics_port(metrics_port)
    result = run_campaign(file, campaigns_dir, analyze=analyze,
                          price_per_core_hour=price_per_core_hour, say=typer.echo,
                          metrics_port=metrics_port, web=_web(web))
    if result.stopped:
        raise typer.Exit(130)
    if result.with_status("failed"):
        raise typer.Exit(1)


@app.command()
@_surge_errors
def examples(directory: Annotated[Path, typer.Argument(help="Where to write them, e.g. .")],
             force: Annotated[bool, typer.Option(
                 help="Overwrite files of the same names")] = False) -> None:
    """Write the shipped example scenarios, topologies and campaigns into DIRECTORY, as
    scenarios/, topologies/ and campaigns/ (they refer to each other by relative paths).
    Existing files are left alone unless --force."""
    from orchestrator.examples import write_examples
    written = write_examples(directory, force)
    typer.echo(f"wrote {len(written)} files under {directory}; e.g. "
               f"surge validate {directory / 'scenarios' / 'quickstart.yaml'}")


def _provisioner(topology_file: Path, overrides: list[str] | None):
    from orchestrator.specs.loader import load_topology
    from topologies.factory import provisioner_for
    return provisioner_for(load_topology(topology_file, overrides or []))


class Via(str, Enum):
    """Who provisions for ``surge up``."""

    surge = "surge"
    ansible = "ansible"


@app.command()
@_surge_errors
def up(topology: TopologyArg,
       overrides: SetOption = None,
       via: Annotated[Via, typer.Option(
           help="surge: surge's own provisioners; ansible: the playbooks in ansible/ through "
                "ansible-runner (placement ssh or local; needs the ansible extra)")] = Via.surge,
       ) -> None:
    """Start a topology's members (idempotent: running members are kept) and declare queues."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if via is Via.ansible:
        from orchestrator.specs.loader import load_topology
        from topologies.ansible_up import up as ansible_up
        spec = load_topology(topology, overrides or [])
        with _holding(spec.name, "up"):
            ansible_up(spec, say=typer.echo)
            if spec.placement == "local":  # the nodes are recorded like surge's own
                for member in _provisioner(topology, overrides).status():
                    _print_member(member)
        return
    provisioner = _provisioner(topology, overrides)
    with _holding(provisioner.topology.name, "up"):
        for member in provisioner.up():
            _print_member(member)
        _record_up(provisioner)


@app.command()
@_surge_errors
def status(topology: TopologyArg,
           overrides: SetOption = None,
           json_output: JsonOption = False) -> None:
    """Show every member of the pool: running or not, PID, endpoints.

    With --json, one document: topology and members, each with index, name, host, amqp_port,
    management_port, prometheus_port, running, pid, standby and client_url.
    """
    from dataclasses import asdict
    provisioner = _provisioner(topology, overrides)
    members = provisioner.status()
    if json_output:
        _print_json({"topology": provisioner.topology.name,
                     "members": [asdict(member) for member in members]})
        return
    for member in members:
        _print_member(member)


@app.command()
@_surge_errors
def down(topology: TopologyArg,
         overrides: SetOption = None) -> None:
    """Stop everything surge started for a topology (by PID) and remove its state; refused
    while a run, campaign or capacity search holds the topology."""
    from topologies import lease
    provisioner = _provisioner(topology, overrides)
    with _holding(provisioner.topology.name, "down"):
        for line in provisioner.down():
            typer.echo(line)
        lease.record_members(provisioner.topology.name, None)


def _holding(name: str, kind: str):
    """Topology ``name`` held for ``surge up`` or ``down`` (refused while a run holds it)."""
    from topologies import lease
    return lease.holding(name, kind)


def _record_up(provisioner) -> None:
    """The running members are now surge up's: any run may use them as they are."""
    from topologies import lease
    lease.record_members(provisioner.topology.name, {"kind": "up", "pid": os.getpid()})


@app.command(hidden=True)
def agent(host: str = "127.0.0.1", port: int = 0,
          max_lifetime: Annotated[float, typer.Option(help="Seconds before exiting")] = 86400.0,
          idle_timeout: Annotated[float, typer.Option(
              min=0.01, help="Seconds after which an idle connection with the token is closed "
                             "(one without has 2 s to send its request)")] = IDLE_TIMEOUT_S,
          max_connections: Annotated[int, typer.Option(
              min=1, help="Connections with the token served at once; more are answered "
                          "503")] = MAX_CONNECTIONS,
          ) -> None:
    """Host workers for a controller (started by surge; token in $SURGE_AGENT_TOKEN)."""
    from drivers.agent import serve
    token = os.environ.get("SURGE_AGENT_TOKEN")
    if not token:
        typer.secho("SURGE_AGENT_TOKEN is not set", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    serve(host, port, token, max_lifetime, idle_timeout_s=idle_timeout,
          max_connections=max_connections)


def _print_member(member) -> None:
    state = (f"running pid {member.pid}" if member.running else
             f"standby pid {member.pid}" if member.standby else "stopped")
    typer.echo(f"{member.name:32} {state:18} amqp {member.host}:{member.port}  "
               f"management :{member.management_port}  metrics :{member.prometheus_port}")


if __name__ == "__main__":
    sys.exit(app())
