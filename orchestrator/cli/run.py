"""``surge run``, ``capacity``, ``capacity-report`` and ``campaign``: load driven through a
topology, one run, a capacity search or a matrix of runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import (
    JsonOption,
    MetricsPortOption,
    SetOption,
    WebOption,
    counts,
    lines,
    print_json,
    surge_errors,
    web_address,
)
from orchestrator.errors import FileError
from orchestrator.loading import loading

group = typer.Typer()


@group.command()
@surge_errors
def run(scenario: Annotated[Path, typer.Argument(help="Scenario YAML, e.g. "
                                                      "scenarios/quickstart.yaml")],
        overrides: SetOption = None,
        runs_dir: Annotated[Path, typer.Option(help="Where run directories go")] = Path("runs"),
        keep: Annotated[bool, typer.Option(
            help="Leave a topology this run started up afterwards")] = False,
        live: Annotated[bool, typer.Option(
            help="Live terminal view (on stderr); --no-live: a progress line every 5 s instead, "
                 "with the page's URL, a moved metrics port and errors")] = True,
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
    with loading():  # the controller and what it drives: loaded only to run
        from orchestrator.run.entry import RunOptions, run_file
    options = RunOptions(runs_dir, keep, live, metrics_port, web_address(web), reuse, analyze)
    report = run_file(scenario, overrides or [], options, lines(json_output))
    if json_output:
        print_json(report.document)
    if not report.completed:
        raise typer.Exit(1)


@group.command()
@surge_errors
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

    Under adverse conditions: capacity.conditions lists ideal and named sets of faults (a
    member killed, consumers slowed, a rolling restart), each started at its time into every
    probe and held until the probe ends unless it gives its own end; every member count is
    searched under each condition in turn, the next probe waiting until the faults are over,
    and one more table gives each condition's sustainable rate, its share of the first
    condition's, its price per 1,000 msg/s per month and how exactly its run accounted for
    every message (e.g. scenarios/rabbitmq-capacity-adverse.yaml).
    """
    with loading():
        from orchestrator.capacity.entry import SearchOptions, search_file
    options = SearchOptions(counts(members), repeat, counts(project), target, runs_dir, live,
                            analyze, web_address(web))
    report = search_file(scenario, overrides or [], options, lines(json_output))
    if json_output:
        print_json(report.document)
    if not report.complete:
        raise typer.Exit(1)


@group.command("capacity-report")
@surge_errors
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
    from results.capacity import as_markdown, reanswer  # the USL fit: loaded only to answer
    try:
        document, slo = reanswer(directory, counts(project) or [], target)
    except ValueError as failure:
        raise FileError(str(failure)) from None
    if json_output:
        print_json({"directory": str(directory), **document})
    else:
        typer.echo(as_markdown(document, slo))


@group.command("prometheus-config")
@surge_errors
def prometheus_config(interval: Annotated[str, typer.Option(
        help="How often Prometheus scrapes the runs, e.g. 1s")] = "1s") -> None:
    """Print a Prometheus scrape job for every surge run on this machine, and create the
    directory its file_sd_configs reads.

    Every run writes its targets (the controller's and the agents' /metrics, each member's
    Prometheus endpoint) to <state>/prometheus/<run id>.json while it goes. With the directory
    there, a Prometheus started before the first run sees each run's file as it appears:

    \b
      surge prometheus-config > prometheus.yml && prometheus --config.file=prometheus.yml
    """
    from orchestrator.run.discovery import default_sd_dir, scrape_config
    from orchestrator.specs.units import parse_duration
    try:
        seconds = parse_duration(interval)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--interval") from None
    directory = default_sd_dir()
    directory.mkdir(parents=True, exist_ok=True)
    typer.echo(scrape_config(directory, seconds), nl=False)


@group.command()
@surge_errors
def campaign(file: Annotated[Path, typer.Argument(help="Campaign YAML, e.g. "
                                                       "campaigns/capacity-sizes.yaml")],
             campaigns_dir: Annotated[Path, typer.Option(
                 help="Where campaign directories go: <dir>/<campaign name>/<cell id>/")]
             = Path("campaigns-runs"),
             analyze: Annotated[bool, typer.Option(
                 help="Analyse the done cells with Spark at the end; the comparison and the "
                      "ranking need it")] = True,
             price_per_core_hour: Annotated[float | None, typer.Option(
                 help="Price of one core for one hour, for the cost ranking (default: the "
                      "campaign's price_per_core_hour, else surge analyze's)")] = None,
             overrides: Annotated[list[str], typer.Option(
                 "--set", help="Override a field in every cell, after the cell's own set and "
                               "matrix, e.g. --set plan.0.hold=5s, --set topology.members=3 or "
                               "--set topology=/abs/my-topology.yaml (relative: to the scenario, "
                               "as in surge run); "
                               "not a key a matrix varies")] = None,
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
    between them if a cell left it changed, and torn down after them. --set changes every
    cell, e.g. a shorter hold or another topology for a quick pass. For example:

    \b
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
    campaign.json in the campaign directory holds every cell's status, verdict and
    overrides; a campaign run with other --set values belongs in another --campaigns-dir
    (completed cells are kept whatever their overrides were).

    Ctrl-C once ends the running cell cleanly and starts no further one; twice forces. The
    topology is torn down either way. Exit status: 0 when every cell is done (passing the
    requirement or not), 1 when a cell failed to run, 130 when stopped by Ctrl-C.
    """
    with loading():
        from orchestrator.campaign.runner import run_campaign
    result = run_campaign(file, campaigns_dir, analyze=analyze, overrides=overrides or [],
                          price_per_core_hour=price_per_core_hour, say=typer.echo,
                          metrics_port=metrics_port, web=web_address(web))
    if result.stopped:
        raise typer.Exit(130)
    if result.with_status("failed"):
        raise typer.Exit(1)
