"""``surge validate``, ``plan`` and ``examples``: spec files checked, shown and written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import SetOption, error, lines, surge_errors, warn
from orchestrator.errors import FileError

group = typer.Typer()


@group.command()
@surge_errors
def validate(files: Annotated[list[Path], typer.Argument(
                 help="Topology, scenario or campaign YAML files")],
             overrides: SetOption = None,
             ) -> None:
    """Check spec files without running anything; every problem is listed with file and line.
    A campaign is checked with every scenario it names under every combination of its matrix.
    --set applies to each scenario, campaign or topology as in surge run, surge campaign or
    surge up. What is valid but
    probably not meant (a fault after the plan ends, a step no longer than measure.settle) is
    a warning line on stderr; warnings alone exit 0."""
    from orchestrator.specs.kinds import check_files  # the spec models: pydantic
    if check_files(files, overrides or [], warn,
                   ok=lambda path, kind: typer.echo(f"{path}: ok ({kind})"),
                   bad=lambda failure: error(str(failure))):
        raise typer.Exit(2)


@group.command("plan")
@surge_errors
def plan_(scenario: Annotated[Path, typer.Argument(
              help="Scenario YAML, e.g. scenarios/mq-uniform-cluster-scaling.yaml")],
          overrides: SetOption = None) -> None:
    """Print everything a run would do, in order, without touching anything: files and
    commands per host (MQ uniform cluster), manifests (Native HA), members and queues
    (RabbitMQ), then the load plan, consumer profile, faults and scaling rules."""
    from orchestrator.run.dryrun import scenario_plan_text  # the spec models and provisioners
    typer.echo(scenario_plan_text(scenario, overrides or [], warn), nl=False)


@group.command()
@surge_errors
def examples(directory: Annotated[Path, typer.Argument(help="Where to write them, e.g. .")],
             force: Annotated[bool, typer.Option(
                 help="Overwrite files of the same names")] = False) -> None:
    """Write the shipped example scenarios, topologies and campaigns into DIRECTORY, as
    scenarios/, topologies/ and campaigns/ (they refer to each other by relative paths).
    Existing files are left alone unless --force."""
    from orchestrator.examples import write_examples  # the spec models, for the schemas
    written = write_examples(directory, force)
    typer.echo(f"wrote {len(written)} files under {directory}; e.g. "
               f"surge validate {directory / 'scenarios' / 'quickstart.yaml'}")


@group.command()
@surge_errors
def schema(directory: Annotated[Path, typer.Argument(help="Where to write them")] = Path("schemas"),
           ) -> None:
    """Write the JSON Schemas of scenarios, topologies, campaigns and capacity sections into
    DIRECTORY, for editors: a spec file whose first line is '# yaml-language-server:
    $schema=../schemas/scenario.schema.json' is checked as it is typed."""
    from orchestrator.specs.schema import write_schemas  # the spec models: pydantic
    for path in write_schemas(directory):
        typer.echo(str(path))


@group.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@surge_errors
def perftest(ctx: typer.Context,
             print_only: Annotated[bool, typer.Option(
                 "--print", help="Print the scenario and topology YAML and stop")] = False,
             out: Annotated[Path, typer.Option(help="Where the two YAML files are written")]
             = Path("perftest"),
             runs_dir: Annotated[Path, typer.Option(help="Where run directories go")]
             = Path("runs"),
             live: Annotated[bool, typer.Option(help="Live terminal view (on stderr)")] = True,
             overrides: SetOption = None,
             ) -> None:
    """Run a PerfTest 2.x command line as it is: its options become a scenario and a topology
    (written to --out), then surge runs them: on one local member, or against the broker of
    its -h/-H URIs (whose password is passed to the run, never written).

    \b
    Examples:
      surge perftest --print -- -x 2 -y 4 -u orders -s 1024 -r 500 -z 30
      surge perftest -- -x 1 -y 1 -qq -vr 100:10 -vr 200:10 -f persistent
      surge perftest --set topology.port_base=7000 -- -x 4 -y 4 -z 30

    An option surge does not support is refused in one line naming it (the docs list every
    PerfTest option and what it becomes).
    """
    import os

    from orchestrator.specs.perftest import PASSWORD_ENV, PerfTestError, write
    try:
        done = write(ctx.args, out)
    except PerfTestError as refused:
        raise FileError(f"perftest: {refused}") from None
    for note in done.notes:
        warn(f"perftest: {note}")
    if print_only:
        for name in ("scenario.yaml", "topology.yaml"):
            typer.echo((out / name).read_text())
        return
    if done.password is not None:
        os.environ[PASSWORD_ENV] = done.password
    from orchestrator.run.entry import RunOptions, run_file
    options = RunOptions(runs_dir=runs_dir, live=live, analyze=False)
    report = run_file(out / "scenario.yaml", overrides or [], options, lines(False))
    if not report.completed:
        raise typer.Exit(1)
