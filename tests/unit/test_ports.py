"""``up`` checks every port of every member it is to start before it starts anything."""

from __future__ import annotations

import json
import socket
import subprocess

import psutil
import pytest

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.rabbitmq import ports
from topologies.rabbitmq.local import LocalRabbitMQ

PORT_BASE = 7810


def _listen(address: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of an earlier run
    sock.bind((address, port))
    sock.listen()
    return sock


def _processes_of(topology: str) -> list[int]:
    """PIDs of processes whose command line or environment names the topology's members."""
    marker = f"surge-{topology}-"
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if marker in " ".join(process.cmdline()) or any(
                    marker in v for v in process.environ().values()):
                found.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.mark.parametrize(("offset", "address", "purpose"), [
    (2, "127.0.0.1", "AMQP"),
    (10002, "127.0.0.1", "management API"),
    (10102, "127.0.0.1", "Prometheus"),
    (20002, "127.0.0.1", "Erlang distribution"),  # the VM binds it on every address
    (30000, "0.0.0.0", "epmd (Erlang port mapper)"),
])
def test_up_refuses_a_busy_port_and_starts_nothing(tmp_path, offset, address, purpose):
    topology = TopologySpec(name="lnx-ports", members=3, start=3, port_base=PORT_BASE)
    provisioner = LocalRabbitMQ(topology, tmp_path)
    port = PORT_BASE + offset
    owner = "epmd" if purpose.startswith("epmd") else "surge-lnx-ports-2@localhost"
    with _listen(address, port):
        try:
            with pytest.raises(ProvisionError) as refused:
                provisioner.up()
            assert str(refused.value).startswith("nothing was started: ")
            assert f"port {port} ({purpose}) of {owner} on 127.0.0.1 is in use" \
                in str(refused.value)
            assert not _processes_of("lnx-ports")
            state_file = tmp_path / "lnx-ports" / "state.json"
            assert not state_file.exists() or not json.loads(state_file.read_text()).get(
                "epmd_pid")
            assert not ports.bound_here(ports.epmd_claim("127.0.0.1", ports.epmd_port(PORT_BASE))) \
                or purpose.startswith("epmd")
        finally:
            provisioner.down()


def test_every_busy_port_is_named_at_once():
    claims = [ports.Claim("m0", "h", 1, "AMQP"), ports.Claim("m1", "h", 2, "AMQP"),
              ports.Claim("epmd", "h", 3, "epmd")]
    with pytest.raises(ProvisionError) as refused:
        ports.require_free(claims, lambda c: c.port != 2)
    assert "port 1 (AMQP) of m0 on h" in str(refused.value)
    assert "port 3 (epmd) of epmd on h" in str(refused.value)
    assert "m1" not in str(refused.value)
    ports.require_free(claims, lambda c: False)


def test_listening_ports_reads_ss_as_it_prints_here():
    with _listen("127.0.0.1", PORT_BASE + 5) as one, _listen("0.0.0.0", PORT_BASE + 6) as two:
        listing = subprocess.run(ports.LISTENING.split(), capture_output=True, text=True,
                                 check=True).stdout
        found = ports.listening_ports(listing)
        assert {one.getsockname()[1], two.getsockname()[1]} <= found
    assert ports.listening_ports("LISTEN 0 4096 [::]:25672 [::]:*\n"
                                 "LISTEN 0 128 *:4369 *:*\nnonsense\n") == {25672, 4369}
