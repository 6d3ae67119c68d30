"""``surge up``, ``status`` and ``down``: a topology's members started, shown and stopped."""

from __future__ import annotations

import logging
from dataclasses import asdict
from enum import Enum
from typing import Annotated

import typer

from orchestrator.cli.common import (
    JsonOption,
    TopologyArg,
    TopologySetOption,
    print_json,
    surge_errors,
)

group = typer.Typer()


class Via(str, Enum):
    """Who provisions for ``surge up``."""

    surge = "surge"
    ansible = "ansible"


@group.command()
@surge_errors
def up(topology: TopologyArg,
       overrides: TopologySetOption = None,
       via: Annotated[Via, typer.Option(
           help="surge: surge's own provisioners; ansible: the playbooks in ansible/ through "
                "ansible-runner (placement ssh or local; needs the ansible extra)")] = Via.surge,
       ) -> None:
    """Start a topology's members (idempotent: running members are kept) and declare queues."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from topologies.manage import bring_up  # the provisioners: loaded only to provision
    typer.echo(_members_text(bring_up(topology, overrides or [], typer.echo,
                                      ansible=via is Via.ansible)), nl=False)


@group.command()
@surge_errors
def status(topology: TopologyArg,
           overrides: TopologySetOption = None,
           json_output: JsonOption = False) -> None:
    """Show every member of the pool: running or not, PID, endpoints.

    With --json, one document: topology and members, each with index, name, host, port (the
    client port: AMQP, or an MQ listener), management_port, prometheus_port, running, pid,
    standby and endpoint (the URL or CONNAME clients use).
    """
    from topologies.manage import members_of
    name, members = members_of(topology, overrides or [])
    if json_output:
        print_json({"topology": name, "members": [asdict(member) for member in members]})
    else:
        typer.echo(_members_text(members), nl=False)


@group.command()
@surge_errors
def down(topology: TopologyArg,
         overrides: TopologySetOption = None) -> None:
    """Stop everything surge started for a topology (by PID) and remove its state; refused
    while a run, campaign or capacity search holds the topology."""
    from topologies.manage import take_down
    typer.echo("".join(f"{line}\n" for line in take_down(topology, overrides or [])), nl=False)


def _members_text(members) -> str:
    """One line per member: name, state, endpoints."""
    return "".join(f"{_member_line(member)}\n" for member in members)


def _member_line(member) -> str:
    state = (f"running pid {member.pid}" if member.running else
             f"standby pid {member.pid}" if member.standby else "stopped")
    return (f"{member.name:32} {state:18} amqp {member.host}:{member.port}  "
            f"management :{member.management_port}  metrics :{member.prometheus_port}")
