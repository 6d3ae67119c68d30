"""The SSH provisioner checks its members' ports on their host (one ``ss`` listing) before it
starts anything: against a real sshd on loopback, with one port of the third member taken."""

from __future__ import annotations

import socket
import sys

import pytest

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from tests.sshd import missing, running_sshd
from topologies.rabbitmq.remote import SshRabbitMQ

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

PORT_BASE = 7830


def test_ssh_up_refuses_a_busy_port_and_starts_nothing(tmp_path):
    with running_sshd(tmp_path / "sshd") as server:
        topology = TopologySpec.model_validate({
            "name": "lnx-ssh-ports", "placement": "ssh", "members": 3, "start": 3,
            "port_base": PORT_BASE,
            "hosts": [{"name": "brokers", "address": server.host, "roles": ["broker"],
                       "members": 3, "work_dir": str(tmp_path / "work"),
                       "python": sys.executable,
                       "ssh": {"port": server.port, "user": server.user,
                               "key_file": str(server.key_file),
                               "known_hosts_file": str(server.known_hosts_file),
                               "retries": 0}}]})
        provisioner = SshRabbitMQ(topology, state_root=tmp_path / "state")
        busy = PORT_BASE + 10100 + 2
        with socket.socket() as taken:
            taken.bind((server.host, busy))
            taken.listen()
            try:
                with pytest.raises(ProvisionError) as refused:
                    provisioner.up()
                assert f"port {busy} (Prometheus) of surge-lnx-ssh-ports-2@localhost on " \
                       f"{server.host} is in use" in str(refused.value)
                assert str(refused.value).startswith("nothing was started")
                assert provisioner.status() and not any(m.pid for m in provisioner.status())
                started = [p.cmdline() for p in server.descendants()
                           if "epmd" in " ".join(p.cmdline())
                           or "rabbitmq" in " ".join(p.cmdline())]
                assert not started
                assert not provisioner.warnings
            finally:
                provisioner.down()
