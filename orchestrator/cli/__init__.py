"""The ``surge`` command line: one module per command group, composed here into ``app``.

A command parses its options, calls one function of the layer below and turns domain errors
into exit codes (:mod:`orchestrator.cli.common`); the loops and rules live below. Each group
imports the heavy layers (spec models, the controller, Spark's pipeline) inside the command that
needs them, so that ``surge --help`` and the load agent start quickly.
"""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator import environment
from orchestrator.cli import agent, results, run, specs, topology
from orchestrator.run.ports import DEFAULT_METRICS_PORT

HELP = f"""Live load generation for message brokers: provision a cluster, ramp load through real
clients, watch it live, and get a run directory and a step table.

\b
Examples:
  surge validate scenarios/quickstart.yaml
  surge run scenarios/quickstart.yaml --set workload.senders=50
  surge run scenarios/quickstart.yaml --no-live --json > result.json
  surge analyze --compare
  surge compare runs/*-uniform-* --json | jq '.[].achieved_rate'
  surge campaign campaigns/capacity-sizes.yaml
  surge status topologies/local-3.yaml --json
  surge --install-completion

While a run runs, its figures are on http://127.0.0.1:{DEFAULT_METRICS_PORT}/metrics for
Prometheus (--metrics-port moves it; file-based service discovery: see the README).
"""

app = typer.Typer(
    help=HELP, epilog=environment.help_text(),
    no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
    rich_markup_mode=None)  # help is plain text: "surge[analysis]" is not a style
for _group in (specs, run, results, topology, agent):
    app.registered_commands += _group.group.registered_commands


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
