"""``surge run`` of IBM MQ scenarios end to end on emulated queue managers (tests/mqemu, NOT IBM
MQ): the uniform cluster provisioned over a real sshd on two loopback hosts by the control
command stand-ins, the controller's checks and the agents' workers through IBM's real ibmmq
package over the emulator's library, and the accounting exact (what was sent is received or
still queued, read by runmqsc)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.web.recorded import recorded_feed
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_rows
from tests.integration.mq_emulated import RUN_FLAGS, on_loopback, sshd, standins_in, surge
from tests.sshd import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

PORT_BASE = int(os.environ.get("MQEMU_RUNS_PORT_BASE", "9570"))
"""Each host's first queue manager listens here (the emulator's range; sessions running side by
side set their own)."""
REBALANCE_INTERVAL_S = 1.0  # the emulated uniform cluster's balancing rounds (MQ: tens of s)
EXPORTER_OFFSET = 5  # each queue manager's exporter listens 5 ports above it
__all__ = ["sshd"]  # mq_emulated's fixture, used here as it is


@pytest.fixture
def standins(tmp_path) -> Iterator[Path]:
    with standins_in(tmp_path / "bin", EXPORTER_OFFSET,
                     {"MQEMU_REBALANCE_INTERVAL_S": str(REBALANCE_INTERVAL_S)}) as bin_dir:
        yield bin_dir


def uniform_topology(sshd, bin_dir: Path, tmp_path: Path, members: int = 4) -> Path:
    """A small document-000 uniform cluster: ``members`` queue managers over the two hosts
    (named by their addresses, so CONNAMEs and the CCDT reach them), one started."""
    spec = {"name": "mq-emu", "broker": "ibmmq", "placement": "ssh", "members": members,
            "start": 1, "queues": [{"name": "REQUEST"}],
            "ibmmq": {"cluster": "UC01", "qm_group": "UC01QM", "qm_prefix": "UC01QM",
                      "channel": "PERF.APP.CHL", "reconnect": "yes",
                      **on_loopback(sshd, bin_dir, tmp_path, members, PORT_BASE,
                                    EXPORTER_OFFSET)}}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def surge_run(scenario: dict, tmp_path: Path, library: Path) -> dict:
    """``surge run --no-live --json`` of ``scenario`` in a fresh process whose MQI library is
    the emulator's; its JSON document."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    done = surge(["run", str(path), "--runs-dir", str(tmp_path / "runs"), *RUN_FLAGS],
                 tmp_path, library)
    return json.loads(done.stdout)


def test_a_uniform_cluster_run_on_emulated_queue_managers_accounts_for_every_message(
        sshd, standins, mqemu_library, tmp_path):
    scenario = {"name": "mq-emu-run", "topology": str(uniform_topology(sshd, standins, tmp_path)),
                "agents": 1,
                "workload": {"pattern": "point-to-point", "queue": "REQUEST", "senders": 4,
                             "receivers": 4, "message": {"size": "1KiB"}},
                "plan": [{"rate_per_sender": 50, "hold": "8s"}],
                "measure": {"settle": "1s", "drain": "20s"}}
    document = surge_run(scenario, tmp_path, mqemu_library)
    accounting = document["accounting"]
    assert document["outcome"] == "completed"
    assert accounting["balanced"] and accounting["lost"] == 0, accounting
    assert accounting["sent"] >= 4 * 50 * 7  # about 8 s at 200 msg/s
    assert (accounting["received"], accounting["still_queued"]) == (accounting["sent"], 0)
    measured = [row for row in document["steps"] if not row["missing_seconds"]]
    assert sum(row["seconds"] for row in measured) >= 5  # a late first tick may split a row
    # the rate over the measured seconds (a row split by a late tick holds one or two of them)
    achieved = sum(row["achieved_rate"] * row["seconds"] for row in measured) / sum(
        row["seconds"] for row in measured)
    assert achieved > 180 and all(row["achieved_rate"] > 150 for row in measured), measured
    # the exporter stand-in's figures: the emulator's CPU on the seconds a publication came
    assert all(row["cpu_percent"].get("UC01QM01", -1) > 0 for row in measured)
    # the queue manager host's CPU (document 000's MQHost CPU%) and the clients taking part
    assert all(0 < percent <= 100 for row in measured
               for percent in row["hosts_cpu_percent"].values())
    # both hosts of the pool, as document 000's MQHost2 before any of its QMs starts
    assert all(len(row["hosts_cpu_percent"]) == 2 for row in measured)
    assert {(row["senders"], row["receivers"], row["queues"]) for row in measured} == {(4, 4, 1)}
    events = [json.loads(line) for line in
              (Path(document["run_dir"]) / "events.jsonl").read_text().splitlines()]
    commands = [e["command"] for e in events if e["kind"] == "remote_command"]
    assert any("dspmq -m UC01QM01" in c for c in commands[:4])  # asked before the run dir
    assert any("strmqm UC01QM01" in c for c in commands)
    assert any("endmqm -i UC01QM01" in c for c in commands)  # taken down at the end
    manifest = read_manifest(Path(document["run_dir"]))
    assert manifest.broker.emulated and manifest.headings()[0].startswith("Broker: emulated MQ")
    assert recorded_feed(Path(document["run_dir"])).since()["run"]["emulated"] is True


def test_scale_out_starts_queue_managers_over_ssh_and_every_message_is_accounted_for(
        sshd, standins, mqemu_library, tmp_path):
    """A step beyond what one emulated queue manager carries: surge starts more (strmqm over
    SSH, in the run); the uniform cluster (the emulator's balancing) moves senders and
    receivers to each new member, surge moves none itself and records where MQ put them, and
    the accounting stays exact."""
    scenario = {"name": "mq-emu-scale",
                "topology": str(uniform_topology(sshd, standins, tmp_path)),
                "agents": 1,
                "workload": {"pattern": "point-to-point", "queue": "REQUEST", "senders": 8,
                             "receivers": 8, "message": {"size": "1KiB"}},
                "plan": [{"rate_per_sender": 50, "hold": "6s"},
                         {"rate_per_sender": 1500, "hold": "25s"}],
                "scaling": {"pool": 4, "scale_out": {
                    "when_any": [{"shortfall": "3%", "for": "4s"}], "cooldown": "8s"}},
                "measure": {"settle": "1s", "drain": "30s"}}
    document = surge_run(scenario, tmp_path, mqemu_library)
    accounting = document["accounting"]
    assert document["outcome"] == "completed"
    assert accounting["balanced"] and accounting["lost"] == 0, accounting
    assert (accounting["received"], accounting["still_queued"]) == (accounting["sent"], 0)
    events = [json.loads(line) for line in
              (Path(document["run_dir"]) / "events.jsonl").read_text().splitlines()]
    started = [e["explain"].split()[0] for e in events if e["kind"] == "member_started"]
    assert started and started == ["UC01QM02", "UC01QM03", "UC01QM04"][:len(started)]
    assert [e for e in events if e["kind"] == "scale_decision"]
    commands = [e["command"] for e in events if e["kind"] == "remote_command"]
    assert any(c.endswith("strmqm UC01QM02") for c in commands)  # over SSH, in the run
    assert not [e for e in events if e["kind"] == "rebalanced"]  # surge moved no worker
    placed = {e["member"]: e for e in events if e["kind"] == "clients_placed"}
    assert sorted(placed) == sorted(started)
    for name, event in placed.items():  # MQ gave each new member senders and receivers
        assert event["placement"][name]["mqperf.sender"] > 0, event
        assert event["placement"][name]["mqperf.receiver"] > 0, event
        assert sum(n for counts in event["placement"].values() for n in counts.values()) == 16
    # every connection a new member holds got there by a client reconnect (the agents' count)
    ticks = read_rows(Path(document["run_dir"]), "ticks")
    reconnects = max(row["reconnects"] for row in ticks)
    assert reconnects >= sum(sum(e["placement"][name].values()) for name, e in placed.items())
    # a move MQ asked for is not an error; a put the queue manager refuses because the queue
    # is full is one (the step overdrives the first member; on a busy host its queue may fill
    # before the next starts), and the agent says which
    texts = {e["error"] for e in events if e["kind"] == "agent_error"}
    assert all("MQRC_Q_FULL" in text for text in texts), texts
    assert (max(row["errors"] for row in ticks) > 0) == bool(texts)
    # the 12,000 msg/s step is more than one emulated queue manager carries: rows per member
    # count, and the members counted go up as they start (one may start only in the drain:
    # each scale-out waits for MQ to move clients before the next decision)
    members = [row["members"] for row in document["steps"] if row["target_rate"] == 12000]
    assert members == sorted(members) and 2 <= members[-1] <= 1 + len(started)
