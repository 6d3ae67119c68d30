"""The provisioner of a cluster surge did not start: settings read once from the places the
topology names, member commands run and recorded, what it cannot measure said."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from drivers.amqp.settings import AmqpSettings
from orchestrator.errors import FileError, ProvisionError
from orchestrator.specs.topology import TopologySpec
from orchestrator.tls import TlsMaterial
from topologies.factory import provisioner_for
from topologies.rabbitmq.existing import ExistingRabbitMQ


def topology(tmp_path: Path, port: int = 5672, **existing) -> TopologySpec:
    (tmp_path / "pw").write_text("p4ss-w0rd\n")
    (tmp_path / "pw").chmod(0o600)
    return TopologySpec.model_validate({
        "name": "outside", "placement": "existing", "queues": [{"name": "q"}],
        "existing": {"members": [{"uri": f"amqp://127.0.0.1:{port}"},
                                 {"uri": "amqps://rabbit-2.example",
                                  "prometheus": "http://rabbit-2.example:15692"}],
                     "credentials": {"user": "perf", "password_file": str(tmp_path / "pw")},
                     **existing}})


def test_clients_get_the_password_from_its_file_and_members_carry_no_credentials(tmp_path):
    provisioner = provisioner_for(topology(tmp_path, vhost="perf"))
    assert isinstance(provisioner, ExistingRabbitMQ)
    members = provisioner.status()
    assert [m.endpoint for m in members] == ["amqp://127.0.0.1:5672",
                                             "amqps://rabbit-2.example:5671"]
    assert all(m.running for m in members)
    settings = AmqpSettings.from_json(provisioner.client_settings())
    assert (settings.user, settings.password, settings.vhost) == ("perf", "p4ss-w0rd", "perf")
    assert "p4ss-w0rd" not in repr(settings)
    assert settings.tls == TlsMaterial()  # amqps with the system's CAs
    parameters = settings.parameters("amqps://rabbit-2.example:5671")
    assert parameters.ssl_options.server_hostname == "rabbit-2.example"
    assert parameters.ssl_options.context.check_hostname
    assert provisioner.down() == ["outside: a cluster surge did not start; nothing stopped"]


def test_what_it_cannot_measure_is_said(tmp_path):
    said = provisioner_for(topology(tmp_path)).unmeasured()
    assert "127.0.0.1:5672" in said["member CPU"]
    assert "member system CPU" in said and "member CPU quota" in said
    assert "management URL" in said["member connections and messages"]


def test_missing_tls_files_are_named_before_anything_connects(tmp_path):
    provisioner = provisioner_for(topology(tmp_path, tls={"ca_file": str(tmp_path / "ca.pem")}))
    with pytest.raises(FileError, match=r"existing\.tls\.ca_file: .*ca\.pem does not exist"):
        provisioner.up()
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    provisioner = provisioner_for(topology(tmp_path, tls={"ca_file": str(tmp_path / "ca.pem")}))
    with pytest.raises(FileError, match="holds no PEM block"):
        provisioner.up()


def test_member_commands_run_with_their_placeholders_and_are_recorded(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))  # the "started" member accepts clients
    port = listener.getsockname()[1]
    log = tmp_path / "commands.log"
    script = tmp_path / "act.sh"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho done "$1"\n')
    script.chmod(0o755)
    recorded = []
    spec = topology(tmp_path, port, commands={
        "start_member": f"{script} start {{index}} {{name}} {{count}}",
        "kill_member": f"{script} kill {{index}} {{name}}"})
    spec = spec.model_copy(update={"start": 1})
    provisioner = ExistingRabbitMQ(spec, record=recorded.append, sleep=lambda s: None)
    try:
        provisioner.stop_member(0, kill=True)
        assert [m.running for m in provisioner.status()] == [False, False]
        member = provisioner.start_member()
        assert member.index == 0 and member.running
    finally:
        listener.close()
    assert log.read_text().splitlines() == [f"kill 0 127.0.0.1:{port}",
                                            f"start 0 127.0.0.1:{port} 1"]
    assert [(r.host, r.status, r.stdout.strip()) for r in recorded] == [
        ("localhost", 0, "done kill"), ("localhost", 0, "done start")]
    with pytest.raises(ProvisionError, match=r"existing\.commands\.stop_member is needed"):
        provisioner.stop_member(0)


def test_a_failing_command_is_an_error_that_quotes_its_output(tmp_path):
    spec = topology(tmp_path, commands={"stop_member": "sh -c 'echo no such unit >&2; exit 5'"})
    recorded = []
    with pytest.raises(ProvisionError, match=r"stop_member .* failed \(status 5\): no such unit"):
        ExistingRabbitMQ(spec, record=recorded.append).stop_member(1)
    assert recorded[0].status == 5
