"""Reading IBM's mq_prometheus exporter, parsing runmqsc depths, and `surge plan`."""

from pathlib import Path

from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.specs.loader import load_topology
from topologies.mq import metrics, provision

ROOT = Path(__file__).resolve().parents[2]

EXPORTER_TEXT = """\
# TYPE ibmmq_qmgr_user_cpu_time_estimate_for_queue_manager_percentage gauge
ibmmq_qmgr_user_cpu_time_estimate_for_queue_manager_percentage{qmgr="UC01QM01"} 12.5
# TYPE ibmmq_qmgr_system_cpu_time_estimate_for_queue_manager_percentage gauge
ibmmq_qmgr_system_cpu_time_estimate_for_queue_manager_percentage{qmgr="UC01QM01"} 4.0
# TYPE ibmmq_qmgr_connection_count gauge
ibmmq_qmgr_connection_count{qmgr="UC01QM01"} 362
# HELP ibmmq_queue_depth Queue depth
# TYPE ibmmq_queue_depth gauge
ibmmq_queue_depth{qmgr="UC01QM01",queue="REQUEST",usage="NORMAL"} 17
ibmmq_queue_depth{qmgr="UC01QM02",queue="REQUEST",usage="NORMAL"} 99
# HELP ibmmq_queue_mqget_count MQGET count
# TYPE ibmmq_queue_mqget_count gauge
ibmmq_queue_mqget_count{qmgr="UC01QM01",queue="REQUEST",usage="NORMAL"} 20700
"""


def test_exporter_reading_of_one_queue_manager():
    reading = metrics.read(EXPORTER_TEXT, "UC01QM01")
    assert reading.cpu_percent_of_host == 16.5
    assert reading.cpu_percent_of_core(24) == 396.0  # 4 of 24 cores: the document's 400%
    assert reading.cpu_percent_of_core(None) is None
    assert reading.connections == 362
    assert reading.depths == {"REQUEST": 17} and reading.gets == {"REQUEST": 20700}


def test_unreachable_exporter_is_none():
    assert metrics.scrape("http://127.0.0.1:9/metrics", "UC01QM01", timeout_s=0.5) is None


def test_runmqsc_depths():
    output = """\
5724-H72 (C) Copyright IBM Corp. 1994, 2024.
     1 : DISPLAY QLOCAL(REQUEST1) CURDEPTH
AMQ8409I: Display Queue details.
   QUEUE(REQUEST1)                         TYPE(QLOCAL)
   CURDEPTH(12)
     2 : DISPLAY QLOCAL(REQUEST2) CURDEPTH
AMQ8409I: Display Queue details.
   QUEUE(REQUEST2)                         TYPE(QLOCAL)
   CURDEPTH(0)
"""
    assert provision._curdepths(output) == {"REQUEST1": 12, "REQUEST2": 0}


def test_provisioning_plan_uploads_then_creates_then_starts():
    topology = load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml", ["start=2"])
    steps = provision.plan(topology)
    kinds = [(s.host, s.what, s.purpose) for s in steps]
    assert kinds[:3] == [("MQHost1", "upload", s.purpose) for s in steps[:3]]
    assert sum(1 for s in steps if s.purpose == "create") == 12
    assert [s.text.split()[-1] for s in steps if s.purpose == "start"] == ["UC01QM01",
                                                                          "UC01QM02"]
    assert steps.index(next(s for s in steps if s.purpose == "start")) > \
        max(i for i, s in enumerate(steps) if s.purpose == "create")


def planned(scenario: str):
    """``surge plan`` of a shipped scenario, which must succeed."""
    result = CliRunner().invoke(app, ["plan", str(ROOT / "scenarios" / scenario)])
    assert result.exit_code == 0, result.output
    return result


def test_surge_plan_prints_everything_without_touching_anything():
    result = planned("mq-uniform-cluster-scaling.yaml")
    out = result.output
    assert "crtmqm -lc -p 1414 -ii /nfs1/uniclus.ini -ic /nfs1/uniclus.mqsc " \
           "-iv CONNAME=MQHost1(1414) UC01QM01" in out
    assert out.count("crtmqm ") == 12 and "strmqm UC01QM12  # scale-out" in out
    assert "Repository2Name=UC01QM07" in out and '"queueManager": "UC01QM"' in out
    assert "Planned load time 780 s" in out  # 13 steps of a minute
    assert "20,700" in out and "248,400" in out  # Table 1's first and last target


def test_surge_plan_for_the_local_rabbitmq_cluster():
    result = planned("rabbitmq-lost-broker.yaml")
    assert "surge-local-3-2@localhost" in result.output
    assert "at 90 s: kill_member member 1" in result.output
    assert "declare quorum queue perf-test-10" in result.output


def test_surge_plan_for_linked_clusters_names_the_sides_shovels_and_servers_started():
    result = planned("linked-queue-pair-growth.yaml")
    out = result.output
    assert "surge-local-linked-a-0@localhost" in out and "surge-local-linked-b-0@localhost" in out
    assert "surge-pair-5: side a's pair-5 -> side b's pair-5" in out
    assert "surge-replies: side b's surge.replies.to-a -> side a's default exchange" in out
    assert "receivers started" in out and "   5      80   100               max       30  " \
        "               10" in out


def test_surge_plan_for_native_ha_prints_the_manifests():
    result = planned("mq-native-ha-requester-sweep.yaml")
    out = result.output
    assert "kind: QueueManager" in out and "type: NativeHA" in out
    assert "  queues.mqsc: |\n    define qlocal('queue') maxdepth(5000) replace" in out
    assert "senders: [1, 2, 4" not in out and "   9 " in out  # nine requester counts
