"""The ports RabbitMQ members and their epmd listen on, and the check that every one of them is
free before anything starts (a busy port is an error naming its member and purpose, not a
half-started cluster)."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from orchestrator.errors import ProvisionError
from topologies.base import Member


@dataclass(frozen=True)
class Claim:
    """A port something surge starts will listen on: whose, where, and what for."""

    owner: str  # a member's node name, or "epmd"
    host: str  # the address clients use
    port: int
    purpose: str
    all_interfaces: bool = False  # the Erlang VM listens on every address, not just ``host``


def dist_port(port_base: int, index: int) -> int:
    """Member ``index``'s Erlang distribution port."""
    return port_base + 20000 + index


def epmd_port(port_base: int) -> int:
    """The topology's private epmd port."""
    return port_base + 30000


def member_claims(member: Member, dist: int) -> list[Claim]:
    """Every port member ``member`` listens on, its Erlang distribution on ``dist``."""
    def claim(port: int, purpose: str, all_interfaces: bool = False) -> Claim:
        return Claim(member.name, member.host, port, purpose, all_interfaces)
    return [claim(member.port, "AMQP"), claim(member.management_port, "management API"),
            claim(member.prometheus_port, "Prometheus"),
            claim(dist, "Erlang distribution", True)]


def epmd_claim(host: str, port: int) -> Claim:
    """The private epmd's ``port`` on ``host`` (epmd listens on every address)."""
    return Claim("epmd", host, port, "epmd (Erlang port mapper)", True)


def require_free(claims: Iterable[Claim], busy: Callable[[Claim], bool]) -> None:
    """Raise a ProvisionError naming every claimed port that ``busy`` says is taken."""
    taken = [c for c in claims if busy(c)]
    if taken:
        raise ProvisionError(
            "nothing was started: " + "; ".join(
                f"port {c.port} ({c.purpose}) of {c.owner} on {c.host} is in use" for c in taken)
            + " by a process surge did not start; stop it or change the topology's port_base")


def bound_here(claim: Claim) -> bool:
    """Whether this host has a socket on the claimed port that would stop the listener from
    binding (tried with SO_REUSEADDR, as the broker binds, so TIME_WAIT leftovers do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("" if claim.all_interfaces else claim.host, claim.port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


LISTENING = "ss -Htln"  # one line per listening TCP socket, without a header


def listening_ports(listing: str) -> set[int]:
    """The ports in the output of :data:`LISTENING` (local address is the 4th column:
    ``127.0.0.1:5672``, ``[::]:25672``, ``*:4369``)."""
    ports = set()
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].rpartition(":")[2].isdigit():
            ports.add(int(fields[3].rpartition(":")[2]))
    return ports
