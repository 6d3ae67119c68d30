"""``surge validate``, ``plan`` and ``examples``: spec files checked, shown and written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import SetOption, error, surge_errors, warn
from orchestrator.examples import write_examples

group = typer.Typer()


@group.command()
@surge_errors
def validate(files: Annotated[list[Path], typer.Argument(
                 help="Topology, scenario or campaign YAML files")],
             overrides: SetOption = None,
             ) -> None:
    """Check spec files without running anything; every problem is listed with file and line.
    A campaign is checked with every scenario it names under every combination of its matrix.
    --set applies to each scenario or topology as in surge run or surge up. What is valid but
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
