"""``surge agent`` (hidden): the load agent a controller starts on each load host."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from drivers.http import IDLE_TIMEOUT_S, MAX_CONNECTIONS
from orchestrator.cli.common import error

group = typer.Typer()


@group.command(hidden=True)
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
    from drivers.agent import serve  # the workers' drivers: loaded only on a load host
    token = os.environ.get("SURGE_AGENT_TOKEN")
    if not token:
        error("SURGE_AGENT_TOKEN is not set")
        raise typer.Exit(2)
    serve(host, port, token, max_lifetime, idle_timeout_s=idle_timeout,
          max_connections=max_connections)
