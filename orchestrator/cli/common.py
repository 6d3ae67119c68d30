"""What the command groups share: their common options, where lines go, JSON on stdout, and
domain errors (:class:`~orchestrator.errors.SurgeError`) turned into one red line and an exit
code, here and nowhere else."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.errors import SurgeError
from orchestrator.run.lines import Lines
from orchestrator.run.ports import DEFAULT_METRICS_PORT
from orchestrator.specs.units import parse_counts

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
TopologyArg = Annotated[Path, typer.Argument(help="Topology YAML, e.g. topologies/local-3.yaml")]
SetOption = Annotated[list[str], typer.Option(
    "--set", help="Override a field, e.g. --set workload.senders=50 or "
                  "--set topology.cpu_per_member=1 (validated like the file).")]
TopologySetOption = Annotated[list[str], typer.Option(
    "--set", help="Override a field of the topology, e.g. --set cpu_per_member=1 or "
                  "--set start=2 (validated like the file).")]


def web_address(address: str) -> str | None:
    """``--web`` checked (None: off)."""
    if address.lower() == "off":
        return None
    # the page server loads http.server and friends: only for the commands that serve
    from orchestrator.web.server import parse_address
    parse_address(address)
    return address


def counts(text: str | None) -> list[int] | None:
    """``1,2,4`` as member counts (None when not given); anything else is a bad parameter."""
    if text is None:
        return None
    try:
        return parse_counts(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def say(json_output: bool):
    """Where human lines go: stdout, or stderr when stdout carries the JSON document."""
    return functools.partial(typer.echo, err=json_output)


def colored(color: str, json_output: bool):
    """Lines in ``color`` where :func:`say` puts them."""
    return functools.partial(typer.secho, fg=color, err=json_output)


def lines(json_output: bool) -> Lines:
    """A run's or search's lines: plain, green, yellow as :func:`say` puts them, and the spec's
    warnings on stderr."""
    return Lines(say(json_output), colored(typer.colors.GREEN, json_output),
                 colored(typer.colors.YELLOW, json_output), warn)


def warn(line: str) -> None:
    """A spec's warning: one yellow line on stderr."""
    typer.secho(line, fg=typer.colors.YELLOW, err=True)


def error(line: str) -> None:
    """An error: one red line on stderr."""
    typer.secho(line, fg=typer.colors.RED, err=True)


def print_json(document, one_line: bool = False) -> None:
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


def surge_errors(command):
    """``command`` with its domain errors turned into one red line and their exit code."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except SurgeError as failure:
            error(str(failure))
            raise typer.Exit(failure.exit_code) from None
    return wrapper
