"""Two IBM MQ queue managers joined by channels, without a queue manager: what the topology
accepts, each queue manager's MQSC, the provisioning plan, and the channel status parser."""

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.specs.topology import TopologySpec
from results.rundir.manifest import LinkRecord
from topologies.factory import provisioner_for
from topologies.mq import pointtopoint, provision
from topologies.mq.linked import LinkedQueueManagers

ROOT = Path(__file__).resolve().parents[2]


def linked(link: dict | None = None, mq: dict | None = None, **more) -> TopologySpec:
    return TopologySpec.model_validate({
        "name": "mql", "broker": "ibmmq", "placement": "ssh", "members": 2, "start": 2,
        "link": {"kind": "channel", "sides": [1, 1], **(link or {})},
        "queues": [{"name": "PAIR%d", "count": 2}, {"name": "PAIR%d.REPLY", "count": 2}],
        "ibmmq": {"qm_prefix": "LQ", "port_base": 1414, "files_dir": "/nfs1",
                  "hosts": [{"name": "MQHost1", "members": 1}, {"name": "MQHost2", "members": 1}],
                  **(mq or {})}, **more})


def problems(data: dict) -> list[str]:
    """What validating ``data`` says, a line each ([]: valid)."""
    try:
        TopologySpec.model_validate(data)
    except ValidationError as error:
        return [line.removeprefix("Value error, ") for e in error.errors()
                for line in e["msg"].split("; ")]
    return []


@pytest.mark.parametrize("change, expected", [
    ({"link": {"kind": "channel"}, "broker": "rabbitmq", "placement": "local", "ibmmq": None},
     "link.kind: channels join two IBM MQ queue managers"),
    ({"link": {"kind": "shovel", "sides": [1, 1]}}, "link.kind: shovels join two local RabbitMQ"),
    ({"link": {"kind": "channel", "sides": [2, 1]}, "members": 3, "start": 3},
     "link.sides: channels join one queue manager on each side"),
    ({"start": 1}, "start: a linked topology starts every member"),
    ({"link": {"kind": "channel", "runs_on": "own"}}, "link.runs_on: channels run inside each"),
    ({"queues": [{"name": "LQ02"}]}, "queues.0: a queue may not be named like a queue manager"),
])
def test_a_channel_link_is_refused_where_it_cannot_be_built(change, expected):
    data = linked().model_dump(exclude_none=True) | change
    if change.get("members") == 3:
        data["ibmmq"]["hosts"][0]["members"] = 2
    found = problems(data)
    assert any(line.startswith(expected) for line in found), found


def test_a_long_queue_manager_name_and_cluster_queues_are_refused():
    data = linked().model_dump(exclude_none=True)
    data["ibmmq"] |= {"qm_prefix": "UC01QMXX", "cluster_queues": True}
    found = problems(data)
    assert any("UC01QMXX01.TO.UC01QMXX02 is longer than MQ's 20 characters" in f for f in found)
    assert any(f.startswith("ibmmq.cluster_queues: ") for f in found)
    assert problems(linked().model_dump(exclude_none=True)) == []


def test_side_a_sends_requests_to_remote_queues_and_keeps_its_reply_queues():
    topology = linked()
    qma, qmb = pointtopoint.pair(topology)
    text = pointtopoint.mqsc_text(topology, qma)
    assert text.splitlines()[5:] == [
        "* Transmission queue and channels",
        "define qlocal(LQ02) usage(xmitq) maxdepth(100000) replace",
        "define channel(LQ01.TO.LQ02) chltype(sdr) trptype(tcp) conname('MQHost2(1414)') "
        "xmitq(LQ02) npmspeed(normal) batchsz(50) replace",
        "define channel(LQ02.TO.LQ01) chltype(rcvr) trptype(tcp) replace",
        "set chlauth('LQ02.TO.LQ01') type(blockuser) userlist('nobody') action(replace)",
        "* Queues",
        "define qremote(PAIR1) rname(PAIR1) rqmname(LQ02) xmitq(LQ02) replace",
        "define qremote(PAIR2) rname(PAIR2) rqmname(LQ02) xmitq(LQ02) replace",
        "define qlocal(PAIR1.REPLY) replace",
        "define qlocal(PAIR2.REPLY) replace"]
    assert "define channel(PERF.APP.CHL) chltype(svrconn) trptype(tcp) replace" in text


def test_side_b_holds_the_request_queues_and_replies_by_the_requesters_queue_manager():
    topology = linked(link={"npmspeed": "fast", "batch_size": 10, "xmitq_maxdepth": 500})
    qma, qmb = pointtopoint.pair(topology)
    lines = pointtopoint.mqsc_text(topology, qmb).splitlines()
    assert "define qlocal(LQ01) usage(xmitq) maxdepth(500) replace" in lines
    assert "define channel(LQ02.TO.LQ01) chltype(sdr) trptype(tcp) conname('MQHost1(1414)') " \
           "xmitq(LQ01) npmspeed(fast) batchsz(10) replace" in lines
    assert lines[-2:] == ["define qlocal(PAIR1) replace", "define qlocal(PAIR2) replace"]
    assert not any("REPLY" in line or "qremote" in line for line in lines)
    assert pointtopoint.start_mqsc(topology, qmb) == "start channel(LQ02.TO.LQ01)\n"
    assert pointtopoint.stop_mqsc(topology, qma) == "stop channel(LQ01.TO.LQ02)\n"


def test_the_plan_creates_each_queue_manager_from_its_own_files_then_starts_its_sender():
    steps = [step.describe() for step in provision.plan(linked())]
    assert steps == [
        "[MQHost1] upload /nfs1/uniclus.ini  # -ii: qm.ini custom stanzas",
        "[MQHost1] upload /nfs1/LQ01.mqsc  # -ic: LQ01's channels and queues, run at every start",
        "[MQHost1] upload /nfs1/LQ01.link.mqsc  # START CHANNEL of LQ01's sender",
        "[MQHost1] run    crtmqm -lc -p 1414 -ii /nfs1/uniclus.ini -ic /nfs1/LQ01.mqsc "
        "-iv CONNAME=MQHost1(1414) LQ01  # create",
        "[MQHost2] upload /nfs1/uniclus.ini  # -ii: qm.ini custom stanzas",
        "[MQHost2] upload /nfs1/LQ02.mqsc  # -ic: LQ02's channels and queues, run at every start",
        "[MQHost2] upload /nfs1/LQ02.link.mqsc  # START CHANNEL of LQ02's sender",
        "[MQHost2] run    crtmqm -lc -p 1414 -ii /nfs1/uniclus.ini -ic /nfs1/LQ02.mqsc "
        "-iv CONNAME=MQHost2(1414) LQ02  # create",
        "[MQHost1] run    strmqm LQ01  # start",
        "[MQHost2] run    strmqm LQ02  # start",
        "[MQHost1] run    runmqsc LQ01 < /nfs1/LQ01.link.mqsc  # link: start its sender channel",
        "[MQHost2] run    runmqsc LQ02 < /nfs1/LQ02.link.mqsc  # link: start its sender channel"]
    assert "AutoCluster" not in pointtopoint.ini_text(linked())


def test_workers_reach_their_sides_queue_manager_by_name_and_requests_in_transit_count():
    provisioner = provisioner_for(linked())
    assert isinstance(provisioner, LinkedQueueManagers)
    assert [[m.endpoint for m in side] for side in provisioner.sides()] == [
        ["mq://MQHost1(1414)/LQ01?channel=PERF.APP.CHL"],
        ["mq://MQHost2(1414)/LQ02?channel=PERF.APP.CHL"]]
    assert not provisioner.balances_clients
    assert provisioner.transit_queues == frozenset({"LQ02"})  # side a's transmission queue
    settings = provisioner.client_settings()
    assert (settings["queue_manager"], settings["ccdt_url"]) == ("", "")


def test_channel_status_from_mq_blocks_and_one_line_answers():
    mq_output = """\
     1 : display chstatus(*) status msgs
AMQ8417I: Display Channel Status details.
   CHANNEL(LQ01.TO.LQ02)                   CHLTYPE(SDR)
   CONNAME(10.0.0.2(1414))                 CURRENT
   MSGS(1200)                              RQMNAME(LQ02)
   STATUS(RUNNING)                         SUBSTATE(MQGET)
   XMITQ(LQ02)
AMQ8417I: Display Channel Status details.
   CHANNEL(LQ02.TO.LQ01)                   CHLTYPE(RCVR)
   STATUS(RETRYING)
"""
    assert pointtopoint.parse_chstatus(mq_output) == {"LQ01.TO.LQ02": "running",
                                                      "LQ02.TO.LQ01": "retrying"}
    assert pointtopoint.parse_chstatus("AMQ8420I: Channel Status not found.\n") == {}


def test_the_link_record_says_where_the_channels_run():
    record = LinkRecord(kind="channel", sides=[["LQ01"], ["LQ02"]],
                        channels={"LQ01.TO.LQ02": "running", "LQ02.TO.LQ01": "running"})
    assert record.states() == {"LQ01.TO.LQ02": "running", "LQ02.TO.LQ01": "running"}
    assert record.where() == "inside each queue manager" and record.side_of("LQ02") == "B"


def test_surge_plan_of_the_linked_scenario_on_mq_prints_the_channels():
    result = CliRunner().invoke(app, [
        "plan", str(ROOT / "scenarios" / "linked-queue-pair-growth.yaml"),
        "--set", f"topology={ROOT / 'topologies' / 'mq-linked.yaml'}",
        "--set", "workload.queue=PAIR%d"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "## Link (sender and receiver channels, started after strmqm)" in out
    assert "LQ01.TO.LQ02: side a's transmission queue LQ02 -> LQ02's queues (PAIR1, PAIR2, " \
           "PAIR3, PAIR4, PAIR5; on LQ01 remote queue definitions)" in out
    assert "define qremote(PAIR5) rname(PAIR5) rqmname(LQ02) xmitq(LQ02) replace" in out
    assert "scale-out" not in out
