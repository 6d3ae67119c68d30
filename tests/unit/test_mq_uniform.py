"""Document 000's uniform cluster rendered from topologies/mq-uc01-uniform.yaml: the crtmqm
lines, the -ii and -ic files against the document's (tests/golden/uc01), and the JSON CCDT."""

import json
from pathlib import Path

import pytest

from orchestrator.specs.loader import load_topology
from topologies.mq import uniform

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "uc01"


@pytest.fixture(scope="module")
def topology():
    return load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml",
                         ["queues=[{name: 'request%d', count: 2}]"])


def commands(text: str) -> list[str]:
    """Lines that are not comments (MQSC: '*', the document prints '#'), blanks dropped."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith(("*", "#"))]


def test_crtmqm_lines_are_the_documents(topology):
    qms = uniform.queue_managers(topology)
    by_host = {}
    for qm in qms:
        by_host.setdefault(qm.host.name, []).append(uniform.crtmqm(topology, qm))
    assert len(qms) == 12 and [qm.name for qm in qms][::6] == ["UC01QM01", "UC01QM07"]
    assert by_host["MQHost1"][:3] == (GOLDEN / "crtmqm-QMHost1.txt").read_text().splitlines()
    assert by_host["MQHost2"][:3] == (GOLDEN / "crtmqm-QMHost2.txt").read_text().splitlines()
    assert by_host["MQHost1"][5].startswith("crtmqm -lc -p 1419 ") and \
        by_host["MQHost1"][5].endswith("CONNAME=MQHost1(1419) UC01QM06")


def test_ini_file_is_the_documents_plus_the_publication_interval(topology):
    ours, theirs = uniform.ini_text(topology), (GOLDEN / "uniclus.ini").read_text()
    document = [line.lower() for line in commands(theirs)]
    assert [line.lower() for line in commands(ours)] == document + [
        "tuningparameters:", "monitorpublishheartbeat=10"]
    assert "Repository1Conname=MQHost1(1414)" in ours


def test_the_publication_interval_is_the_topologys_unless_its_ini_sets_it():
    path = ROOT / "topologies" / "mq-uc01-uniform.yaml"
    five = load_topology(path, ["ibmmq.statistics_interval=5s"])
    assert "   MonitorPublishHeartBeat=5\n" in uniform.ini_text(five)
    assert uniform.statistics_interval(five.ibmmq) == 5.0
    own = load_topology(path, ["ibmmq.ini={TuningParameters: {MonitorPublishHeartBeat: '30'}}"])
    assert uniform.ini_text(own).count("MonitorPublishHeartBeat") == 1
    assert uniform.statistics_interval(own.ibmmq) == 30.0


def test_with_sudo_the_slice_and_the_start_run_as_root_without_a_prompt():
    path = ROOT / "topologies" / "mq-uc01-uniform.yaml"
    spec = load_topology(path, ["ibmmq.sudo=true"])
    qm = uniform.queue_managers(spec)[0]
    assert uniform.strmqm(spec, qm) == (
        "sudo -n systemctl set-property --runtime mq-UC01QM01.slice CPUQuota=400% && "
        "sudo -n systemd-run --scope --slice=mq-UC01QM01.slice --unit=UC01QM01-start "
        "--uid=mqm strmqm UC01QM01")


def test_mqsc_file_is_the_documents(topology):
    assert commands(uniform.mqsc_text(topology)) == \
        commands((GOLDEN / "uniclus.mqsc").read_text())
    assert all(line.startswith("*") for line in uniform.mqsc_text(topology).splitlines()
               if not line.startswith(("define", "alter")))  # MQSC comments


def test_cluster_queues_are_instances_of_one_queue_treated_alike():
    """Document 002: with ibmmq.cluster_queues every queue manager's definition is an instance
    of the cluster queue, the local one no better than the others (CLWLUSEQ(ANY))."""
    spec = load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml",
                         ["queues=[{name: 'request%d', count: 2}]", "ibmmq.cluster_queues=true"])
    assert [line for line in commands(uniform.mqsc_text(spec)) if "qlocal" in line] == [
        f"define qlocal('request{n}') cluster(UC01) clwluseq(any) replace" for n in (1, 2)]


def test_start_stop_and_status_lines(topology):
    qm = uniform.queue_managers(topology)[7]
    assert (qm.name, qm.host.name, qm.port, qm.conname) == ("UC01QM08", "MQHost2", 1415,
                                                            "MQHost2(1415)")
    start = uniform.strmqm(topology, qm)
    assert "mq-UC01QM08.slice CPUQuota=400%" in start and start.endswith("strmqm UC01QM08")
    assert uniform.endmqm(qm) == "endmqm -r UC01QM08"
    assert uniform.endmqm(qm, kill=True) == "endmqm -i UC01QM08"
    assert uniform.parse_dspmq("QMNAME(UC01QM08)      STATUS(Running)\n") == "Running"
    assert uniform.parse_dspmq("QMNAME(UC01QM08)      STATUS(Ended normally)") == \
        "Ended normally"
    assert uniform.parse_dspmq("AMQ7048E: The queue manager name is either not valid") is None


def test_ccdt_has_one_documented_entry_per_queue_manager_of_the_group(topology):
    document = json.loads(uniform.ccdt_text(topology))
    entries = document["channel"]
    assert set(document) == {"channel"} and len(entries) == 12
    allowed = {"name", "type", "clientConnection", "connectionManagement"}
    for entry, qm in zip(entries, uniform.queue_managers(topology)):
        assert set(entry) <= allowed
        assert entry["name"] == "PERF.APP.CHL" and entry["type"] == "clientConnection"
        assert entry["clientConnection"] == {
            "connection": [{"host": qm.host.name, "port": qm.port}], "queueManager": "UC01QM"}
        assert set(entry["connectionManagement"]) <= {
            "affinity", "clientWeight", "defaultReconnect", "sharingConversations"}
        assert entry["connectionManagement"]["sharingConversations"] == 1


def test_a_topology_that_does_not_add_up_is_refused():
    from orchestrator.errors import SpecError
    with pytest.raises(SpecError, match="ibmmq.hosts hold 12 queue managers; members says 10"):
        load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml", ["members=10"])


def test_queue_names_mq_would_refuse_are_refused_before_anything_runs():
    from orchestrator.errors import SpecError
    with pytest.raises(SpecError) as caught:
        load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml", [
            "queues=[{name: 'pair-%d', count: 5}, {name: PAIR%d.REPLY, count: 5}, {name: "
            "perf, per_member: true}, {name: " + "Q" * 47 + ", per_member: true}]"])
    assert sorted((p.field, p.message) for p in caught.value.problems) == [
        ("queues.0.name", "'pair-1' is not an MQ object name (at most 48 of A-Z a-z 0-9 . _ / "
                          "%; no -)"),
        ("queues.3.name", f"'{'Q' * 47}.0' is not an MQ object name (at most 48 of A-Z a-z "
                          f"0-9 . _ / %; no -)")]


def test_workers_reach_the_group_through_the_ccdt_as_perfharness_does(topology):
    from drivers.mq.settings import MqSettings
    settings = uniform.client_settings(topology)
    assert settings == {"queue_manager": "*UC01QM", "channel": "PERF.APP.CHL",
                        "ccdt_url": "file:///nfs1/UC01.json", "reconnect": "yes",
                        "appltag_sender": "mqperf.sender", "appltag_receiver": "mqperf.receiver"}
    MqSettings.from_json(settings)  # what the MQ driver is given
