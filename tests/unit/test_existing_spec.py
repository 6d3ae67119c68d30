"""The spec of a cluster surge did not start: URIs, credentials that never sit in the file,
and what a scenario may ask of such a cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.errors import SpecError
from orchestrator.specs.loader import load_scenario, load_topology
from orchestrator.specs.secrets import SecretError


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


TOPOLOGY = """\
name: staging
placement: existing
existing:
  members:
    - {uri: "amqps://rabbit-1.example:5671", prometheus: "http://rabbit-1.example:15692"}
    - {uri: "amqps://rabbit-2.example"}
  vhost: perf
  credentials: {user: perf, password_file: secrets/password}
  tls: {ca_file: ca.pem}
queues: [{name: perf}]
"""


def test_an_existing_cluster_is_as_large_as_its_list_and_files_are_beside_the_topology(tmp_path):
    topology = load_topology(_write(tmp_path / "t.yaml", TOPOLOGY))
    assert (topology.members, topology.start) == (2, 2)
    assert topology.existing.credentials.password_file == tmp_path / "secrets/password"
    assert topology.existing.tls.ca_file == tmp_path / "ca.pem"
    assert [m.port for m in topology.existing.members] == [5671, 5671]
    assert topology.existing.declare is False


@pytest.mark.parametrize("change, expected", [
    ("credentials: {user: perf, password_file: secrets/password}",
     "credentials: {user: perf, password: hunter2}"),
    ('{uri: "amqps://rabbit-2.example"}', '{uri: "amqps://perf:hunter2@rabbit-2.example"}'),
    ('prometheus: "http://rabbit-1.example:15692"', 'prometheus: "http://u:hunter2@r1:15692"'),
])
def test_a_password_written_in_the_topology_is_refused_without_echoing_it(tmp_path, change,
                                                                           expected):
    path = _write(tmp_path / "t.yaml", TOPOLOGY.replace(change, expected))
    with pytest.raises(SpecError) as raised:
        load_topology(path)
    text = str(raised.value)
    assert "password_env" in text and "hunter2" not in text
    assert text.count("\n") == 0


@pytest.mark.parametrize("change, expected", [
    ('"amqps://rabbit-2.example"', "existing.members.1.uri: expected amqp://HOST"),
    ('"amqps://rabbit-2.example"', "existing.members.1.uri: give the vhost in existing.vhost"),
    ("password_file: secrets/password", "existing.credentials: give exactly one of"),
    ("tls: {ca_file: ca.pem}", "existing.tls.key_file: a client certificate needs both"),
])
def test_bad_existing_sections_name_the_field(tmp_path, change, expected):
    replacement = {"existing.members.1.uri: expected amqp://HOST": '"http://rabbit-2"',
                   "existing.members.1.uri: give the vhost in existing.vhost":
                       '"amqp://rabbit-2/perf"',
                   "existing.credentials: give exactly one of":
                       "password_file: p, password_env: P",
                   "existing.tls.key_file: a client certificate needs both":
                       "tls: {cert_file: c.pem}"}[expected]
    path = _write(tmp_path / "t.yaml", TOPOLOGY.replace(change, replacement))
    with pytest.raises(SpecError, match=expected.replace(".", r"\.")):
        load_topology(path)


def test_a_password_is_read_when_needed_and_its_absence_is_named(tmp_path, monkeypatch, caplog):
    topology = load_topology(_write(tmp_path / "t.yaml", TOPOLOGY))
    credentials = topology.existing.credentials
    with pytest.raises(SecretError, match=r"existing\.credentials\.password_file: .* does not "
                                          r"exist"):
        credentials.password("existing.credentials")
    (tmp_path / "secrets").mkdir()
    secret = tmp_path / "secrets/password"
    secret.write_text("s3cret\n")
    os.chmod(secret, 0o644)
    assert credentials.password() == "s3cret"
    assert "can be read by other users" in caplog.text
    from_env = credentials.model_copy(update={"password_file": None, "password_env": "PW_X"})
    monkeypatch.delenv("PW_X", raising=False)
    with pytest.raises(SecretError, match="PW_X is not set"):
        from_env.password()
    monkeypatch.setenv("PW_X", "from-env")
    assert from_env.password() == "from-env"


SCENARIO = """\
name: s
topology: t.yaml
workload: {queue: perf, senders: 1, receivers: 1}
plan: ["10:5s"]
"""


def test_scaling_and_member_faults_need_the_commands_that_do_them(tmp_path):
    _write(tmp_path / "t.yaml", TOPOLOGY)
    asks = SCENARIO + """\
scaling:
  scale_out: {when_any: [{shortfall: 5%}]}
faults:
  - {kind: kill_member, member: 1, at: 2s}
  - {kind: publish_spike, at: 3s}
"""
    path = _write(tmp_path / "s.yaml", asks)
    with pytest.raises(SpecError) as raised:
        load_scenario(path)
    lines = str(raised.value).splitlines()
    assert len(lines) == 2
    assert "scaling.scale_out: topology staging is a cluster surge did not start" in lines[0]
    assert "existing.commands.start_member" in lines[0]
    assert "faults.0.kind" in lines[1] and "existing.commands.kill_member, " \
                                           "existing.commands.start_member" in lines[1]
    commands = TOPOLOGY.replace("  tls: {ca_file: ca.pem}\n", """\
  tls: {ca_file: ca.pem}
  commands:
    start_member: "ssh {name} sudo systemctl start rabbitmq-server"
    kill_member: "ssh {name} sudo systemctl kill -s KILL rabbitmq-server"
""")
    _write(tmp_path / "t.yaml", commands)
    scenario, topology = load_scenario(path)
    assert topology.existing.commands.kill_member.startswith("ssh {name}")


def test_a_command_may_use_only_the_placeholders_surge_fills_in(tmp_path):
    bad = TOPOLOGY.replace("  tls: {ca_file: ca.pem}\n", """\
  tls: {ca_file: ca.pem}
  commands: {start_member: "kubectl scale sts/r --replicas={replicas}", stop_member: "x {"}
""")
    with pytest.raises(SpecError) as raised:
        load_topology(_write(tmp_path / "t.yaml", bad))
    text = str(raised.value)
    assert "existing.commands.start_member: unknown placeholder {replicas}" in text
    assert "existing.commands.stop_member: " in text and "{{" in text
