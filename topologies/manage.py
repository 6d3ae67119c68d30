"""``surge up``, ``status`` and ``down`` below the command line: a topology file's members
started, shown or stopped, with the topology held against runs while they change."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from orchestrator.specs.loader import load_topology
from topologies import ansible_up, lease
from topologies.base import Member, Provisioner
from topologies.factory import provisioner_for


def provisioner_of(topology: Path, overrides: list[str]) -> Provisioner:
    """The provisioner of the topology file (with ``--set`` ``overrides``)."""
    return provisioner_for(load_topology(topology, overrides))


def members_of(topology: Path, overrides: list[str]) -> tuple[str, list[Member]]:
    """The topology's name and every member of its pool: running or not, PID, endpoints."""
    provisioner = provisioner_of(topology, overrides)
    return provisioner.topology.name, provisioner.status()


def bring_up(topology: Path, overrides: list[str], say: Callable[[str], None],
             ansible: bool = False) -> list[Member]:
    """Start the topology's members (running ones are kept) and declare its queues, through
    surge's own provisioner or (``ansible``) the playbooks; the members as they now are (none
    known for playbooks run on remote hosts)."""
    spec = load_topology(topology, overrides)
    with lease.holding(spec.name, "up"):
        if ansible:
            ansible_up.up(spec, say=say)
            # local nodes the playbooks started are recorded like surge's own
            return provisioner_for(spec).status() if spec.placement == "local" else []
        provisioner = provisioner_for(spec)
        members = provisioner.up()
        # the running members are now surge up's: any run may use them as they are
        lease.record_members(spec.name, {"kind": "up", "pid": os.getpid()})
        return members


def take_down(topology: Path, overrides: list[str]) -> list[str]:
    """Stop everything surge started for the topology (by PID) and forget its members; what
    was done, one line each. Refused while a run, campaign or capacity search holds it."""
    provisioner = provisioner_of(topology, overrides)
    with lease.holding(provisioner.topology.name, "down"):
        done = provisioner.down()
        lease.record_members(provisioner.topology.name, None)
    return done
