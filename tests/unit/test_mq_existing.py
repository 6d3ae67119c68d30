"""IBM MQ queue managers surge did not start: the topology's errors, the provisioner's commands
(a real shell script run through the user's templates), its figures and what it gives agents."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from drivers.mq.settings import MqSettings
from orchestrator.errors import ProvisionError, SpecError
from orchestrator.specs.loader import load_topology
from orchestrator.specs.secrets import SecretError
from topologies.factory import provisioner_for
from topologies.mq import metrics
from topologies.mq.existing import ExistingQueueManagers

TOPOLOGY = """\
name: mq-staging
broker: ibmmq
placement: existing
queues: [{name: REQUEST}]
existing:
  credentials: {user: perf, password_env: SURGE_TEST_MQ_PASSWORD}
ibmmq:
  qm_group: UC01QM
  channel: PERF.APP.CHL
  queue_managers:
    - {name: UC01QM01, conname: "qm1.example.com(1414)",
       exporter: "http://qm1.example.com:9157/metrics", cpus: 4}
    - {name: UC01QM02, conname: "qm2.example.com(1414)"}
  tls: {cipher_spec: ANY_TLS12_OR_HIGHER, key_repository: /var/mqm/ssl/client}
"""


def write(tmp_path: Path, text: str = TOPOLOGY) -> Path:
    path = tmp_path / "mq.yaml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as raised:
        load_topology(write(tmp_path, text))
    return str(raised.value)


def test_queue_managers_by_conname_make_the_pool(tmp_path):
    topology = load_topology(write(tmp_path))
    assert (topology.members, topology.start) == (2, 2)
    assert [qm.name for qm in topology.ibmmq.queue_managers] == ["UC01QM01", "UC01QM02"]
    assert isinstance(provisioner_for(topology), ExistingQueueManagers)


BAD = {
    "password_env": TOPOLOGY.replace("password_env: SURGE_TEST_MQ_PASSWORD", "password: hunter2"),
    "queue_managers (name and conname": TOPOLOGY.split("  queue_managers:")[0],
    "needs its HOST(PORT)": TOPOLOGY.replace('conname: "qm2.example.com(1414)"', "channel: X"),
    "expected HOST(PORT)": TOPOLOGY.replace("qm1.example.com(1414)", "qm1.example.com:1414"),
    "surge does not define queues": TOPOLOGY.replace("  credentials:",
                                                     "  declare: true\n  credentials:"),
    "UC01QM01 is listed twice": TOPOLOGY.replace("UC01QM02", "UC01QM01"),
    "ibmmq.queue_managers, not here": TOPOLOGY.replace(
        "  credentials:", "  members: [{uri: 'amqp://x'}]\n  credentials:"),
}


@pytest.mark.parametrize("says", sorted(BAD))
def test_bad_existing_mq_topologies_are_refused_in_one_line_each(tmp_path, says):
    message = problems(tmp_path, BAD[says])
    assert says in message and "hunter2" not in message
    assert "Traceback" not in message


def test_without_queue_managers_or_ccdt_the_error_says_what_is_needed(tmp_path):
    message = problems(tmp_path, TOPOLOGY.split("  queue_managers:")[0])
    assert "mq.yaml" in message and "ibmmq" in message
    assert "queue_managers" in message and "ccdt_url" in message


def test_a_ccdt_alone_is_the_group_as_one_member_reached_by_star_group(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_TEST_MQ_PASSWORD", "s3cret")
    text = TOPOLOGY.split("  queue_managers:")[0] + "  ccdt_url: file:///var/mqm/UC01.json\n"
    topology = load_topology(write(tmp_path, text))
    provisioner = ExistingQueueManagers(topology)
    assert topology.members == 1 and provisioner.balances_clients
    member = provisioner.up()[0]
    assert (member.name, member.endpoint, member.running) == ("*UC01QM", "*UC01QM", True)
    settings = provisioner.client_settings()
    assert (settings["queue_manager"], settings["ccdt_url"]) == \
        ("*UC01QM", "file:///var/mqm/UC01.json")
    sample = provisioner.sample()  # no exporter: unknown, never zero
    assert (sample.members[0].cpu, sample.members[0].connections, sample.queue_depths) == \
        (None, None, None)


def test_the_ccdt_url_may_not_carry_credentials(tmp_path):
    text = TOPOLOGY + "  ccdt_url: https://perf:hunter2@ccdt.example.com/UC01.json\n"
    message = problems(tmp_path, text)
    assert "password_env" in message and "hunter2" not in message


def test_client_settings_carry_credentials_and_tls_read_at_run_time(tmp_path, monkeypatch):
    topology = load_topology(write(tmp_path))
    provisioner = ExistingQueueManagers(topology)
    monkeypatch.delenv("SURGE_TEST_MQ_PASSWORD", raising=False)
    with pytest.raises(SecretError, match="existing.credentials.password_env"):
        provisioner.client_settings()
    monkeypatch.setenv("SURGE_TEST_MQ_PASSWORD", "s3cret")
    settings = MqSettings.from_json(provisioner.client_settings())
    assert (settings.user, settings.password) == ("perf", "s3cret")
    assert (settings.tls_cipher_spec, settings.tls_key_repository) == \
        ("ANY_TLS12_OR_HIGHER", "/var/mqm/ssl/client")
    assert settings.queue_manager == "" and not provisioner.balances_clients
    endpoints = [m.endpoint for m in provisioner.status()]
    assert endpoints == ["mq://qm1.example.com(1414)/UC01QM01?channel=PERF.APP.CHL",
                         "mq://qm2.example.com(1414)/UC01QM02?channel=PERF.APP.CHL"]
    assert not any("s3cret" in e for e in endpoints)


def test_up_checks_every_listener_and_says_which_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_TEST_MQ_PASSWORD", "s3cret")
    asked = []

    def reach(host, port):
        asked.append((host, port))
        return "Connection refused" if host == "qm2.example.com" else None

    provisioner = ExistingQueueManagers(load_topology(write(tmp_path)), reach=reach)
    with pytest.raises(ProvisionError) as raised:
        provisioner.up()
    assert asked == [("qm1.example.com", 1414), ("qm2.example.com", 1414)]
    assert "UC01QM02" in str(raised.value) and "qm2.example.com(1414)" in str(raised.value)
    assert "Connection refused" in str(raised.value)


def test_members_are_started_and_killed_by_the_users_commands_and_recorded(tmp_path):
    script = tmp_path / "qmctl.sh"
    log = tmp_path / "qmctl.log"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n[ "$1" != fail ] || {{ echo "no such '
                      f'host" >&2; exit 3; }}\necho done\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    commands = (f"  commands:\n    start_member: '{script} start {{name}} {{index}} {{count}}'\n"
                f"    kill_member: '{script} kill \"{{name}}\"'\n"
                f"    stop_member: '{script} fail {{name}}'\n")
    text = TOPOLOGY.replace("  credentials:", commands + "  credentials:") + "start: 1\n"
    recorded = []
    provisioner = ExistingQueueManagers(load_topology(write(tmp_path, text)),
                                        record=recorded.append)
    assert [m.running for m in provisioner.status()] == [True, False]
    started = provisioner.start_member()
    assert (started.name, started.running) == ("UC01QM02", True)
    provisioner.stop_member(1, kill=True)
    assert not provisioner.status()[1].running
    with pytest.raises(ProvisionError) as raised:
        provisioner.stop_member(0)
    assert "existing.commands.stop_member" in str(raised.value)
    assert "no such host" in str(raised.value) and "status 3" in str(raised.value)
    assert log.read_text().splitlines() == ["start UC01QM02 1 2", "kill UC01QM02",
                                            "fail UC01QM01"]
    assert [(r.status, r.stdout.strip()) for r in recorded] == [(0, "done"), (0, "done"),
                                                               (3, "")]
    assert provisioner.status()[0].running  # a command that failed changed nothing
    assert provisioner.down()[0].endswith("(surge did not start them)")
    assert log.read_text().count("\n") == 3  # down ran nothing


def test_without_commands_scale_out_is_refused_by_the_provisioner_too(tmp_path):
    provisioner = ExistingQueueManagers(load_topology(write(tmp_path, TOPOLOGY + "start: 1\n")))
    with pytest.raises(ProvisionError, match="existing.commands.start_member is not given"):
        provisioner.start_member()


def test_figures_come_from_the_exporters_where_there_are_any(tmp_path):
    metrics_text = (
        'ibmmq_qmgr_connection_count{qmgr="UC01QM01"} 12\n'
        'ibmmq_queue_depth{qmgr="UC01QM01",queue="REQUEST"} 5\n')
    scraped = []

    def scrape(url, qmgr):
        scraped.append((url, qmgr))
        return metrics.read(metrics_text, qmgr)

    provisioner = ExistingQueueManagers(load_topology(write(tmp_path)), scrape=scrape)
    sample = provisioner.sample()
    assert scraped == [("http://qm1.example.com:9157/metrics", "UC01QM01")]
    assert [m.connections for m in sample.members] == [12, None]
    assert sample.queue_depths is None  # UC01QM02 has no exporter: the depth is unknown
    assert provisioner.settled_queue_depths() is None
