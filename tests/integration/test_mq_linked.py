"""Document 004's messages moved between queue managers on emulated IBM MQ (tests/mqemu, NOT IBM
MQ): two queue managers over a real sshd on two loopback hosts, joined by sender and receiver
channels with a transmission queue each way, requesters on one and servers on the other, run
by ``surge run`` in a fresh process; the cost split by part and a stopped channel that loses
nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from results.documents import document_table
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_rows
from results.timeline import read_events
from tests.integration.mq_emulated import RUN_FLAGS, on_loopback, sshd, standins_in, surge
from tests.sshd import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

PORT_BASE = int(os.environ.get("MQEMU_LINK_PORT_BASE", "9530"))
"""Each host's queue manager listens here (the emulator's range; sessions running side by
side set their own)."""
EXPORTER_OFFSET = 5
__all__ = ["sshd"]  # mq_emulated's fixture, used here as it is


@pytest.fixture
def standins(tmp_path) -> Iterator[Path]:
    with standins_in(tmp_path / "bin", EXPORTER_OFFSET) as bin_dir:
        yield bin_dir


def linked_topology(sshd, bin_dir: Path, tmp_path: Path) -> Path:
    """LQ01 on 127.0.0.1 (side a) and LQ02 on 127.0.1.2 (side b), two queue pairs."""
    spec = {"name": "mq-link", "broker": "ibmmq", "placement": "ssh", "members": 2, "start": 2,
            "link": {"kind": "channel", "sides": [1, 1], "batch_size": 20},
            "queues": [{"name": "PAIR%d", "count": 2}, {"name": "PAIR%d.REPLY", "count": 2}],
            "ibmmq": {"qm_prefix": "LQ", "channel": "PERF.APP.CHL",
                      **on_loopback(sshd, bin_dir, tmp_path, 2, PORT_BASE, EXPORTER_OFFSET)}}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def surge_run(scenario: dict, tmp_path: Path, library: Path) -> tuple[dict, Path]:
    """``surge run`` of ``scenario``; its JSON document and run directory."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    done = surge(["run", str(path), "--runs-dir", str(tmp_path / "runs"), *RUN_FLAGS],
                 tmp_path, library)
    document = json.loads(done.stdout)
    return document, Path(document["run_dir"])


def scenario(topology: Path, name: str, **more) -> dict:
    """Request/reply over the pairs: 4 requesters on side a, 2 servers on side b."""
    workload = {"pattern": "request-reply", "queue": "PAIR%d", "senders": 4, "receivers": 2,
                "in_flight": 1, "message": {"size": "1KiB", "persistent": True},
                **more.pop("workload", {})}
    return {"name": name, "topology": str(topology), "agents": 2, "workload": workload,
            **more}


def remote_commands(run_dir: Path) -> list[dict]:
    return [e for e in read_events(run_dir) if e["kind"] == "remote_command"]


def test_requests_cross_the_channels_and_the_cost_is_split_by_side(
        sshd, standins, mqemu_library, tmp_path):
    topology = linked_topology(sshd, standins, tmp_path)
    document, run_dir = surge_run(scenario(
        topology, "it-mq-link", plan=[{"rate_per_sender": 0, "hold": "6s", "senders": [2, 4]}],
        measure={"settle": "1s", "drain": "15s"}), tmp_path, mqemu_library)
    accounting = document["accounting"]
    assert document["outcome"] == "completed"
    assert accounting["balanced"] and accounting["lost"] == 0, accounting
    assert accounting["sent"] > 0
    assert (accounting["received"], accounting["still_queued"]) == (accounting["sent"], 0)
    manifest = read_manifest(run_dir)
    assert manifest.broker.emulated
    assert manifest.link.kind == "channel" and manifest.link.sides == [["LQ01"], ["LQ02"]]
    assert manifest.link.channels == {"LQ01.TO.LQ02": "running", "LQ02.TO.LQ01": "running"}
    assert manifest.agent_roles == {"0": "senders", "1": "receivers"}
    files = tmp_path / "nfs1"
    assert "define qremote(PAIR1) rname(PAIR1) rqmname(LQ02) xmitq(LQ02) replace" in \
        (files / "LQ01.mqsc").read_text()
    assert not (files / "UC01.json").exists()  # no CCDT: each side by its own listener
    commands = remote_commands(run_dir)
    started = [c for c in commands if "LQ01.link.mqsc" in c["command"]]
    assert started and started[0]["status"] == 0 and "AMQ8018I" in started[0]["stdout"]
    assert any(c["command"].endswith("endmqm -i LQ01") for c in commands)
    split = document_table("004-split", [run_dir])
    assert [row[0] for row in split.rows] == [
        "broker A + link: member LQ01", "broker B + link: member LQ02",
        "agent 0 (requesters)", "agent 1 (responders)", "total"]
    assert any("inside each queue manager" in note for note in split.notes)


def test_a_stopped_channel_holds_requests_on_side_as_transmission_queue_and_loses_none(
        sshd, standins, mqemu_library, tmp_path):
    topology = linked_topology(sshd, standins, tmp_path)
    document, run_dir = surge_run(scenario(
        topology, "it-mq-link-down", workload={"reply_timeout": "30s"},
        # the channels' stop and start are remote commands of a second or more each on a busy
        # host (beside two other modules the fault, due to clear at 8 s, cleared at 26 s): the
        # hold leaves several seconds of load after the start however long they take
        plan=[{"rate_per_sender": 0, "hold": "36s"}],
        faults=[{"kind": "link_down", "at": 3, "duration": 5}],
        measure={"settle": "1s", "drain": "20s"}), tmp_path, mqemu_library)
    accounting = document["accounting"]
    assert document["outcome"] == "completed"
    # a channel stopped after its batch repeats nothing: every request answered exactly once
    assert accounting["received"] == accounting["sent"] > 0 and accounting["lost"] == 0 and \
        accounting["unexplained"] == 0 and accounting["still_queued"] == 0, accounting
    assert accounting["duplicates"] == 0, accounting
    manifest = read_manifest(run_dir)
    assert manifest.accounting_details["timeouts"] == 0
    events = read_events(run_dir)
    kinds = [e["kind"] for e in events]
    assert "link_down" in kinds and kinds.index("link_down") < kinds.index("fault_cleared")
    stops = [e for e in events if e["kind"] == "remote_command" and "AMQ8019I" in e["stdout"]]
    assert sorted(c["host"] for c in stops) == ["127.0.0.1", "127.0.1.2"], stops  # both senders
    # once both channels had stopped, nothing came back until they were started again, and the
    # requests put meanwhile were counted where they waited: side a's transmission queue
    down_at = next(e["t"] for e in events if e["kind"] == "link_down")
    up_at = next(e["t"] for e in events if e["kind"] == "fault_cleared")
    ticks = read_rows(run_dir, "ticks")
    down = [t for t in ticks if down_at + 1 <= t["t"] <= down_at + 5]  # 5 s: the fault's
    assert len(down) >= 3 and max(t["receive_rate"] for t in down) == 0, down
    assert all(t["queue_depth"] for t in down), down
    stop_at = next(e["t"] for e in events if e["kind"] == "senders_stop")
    after = [t for t in ticks if up_at + 1 <= t["t"] <= stop_at]
    assert after and min(t["receive_rate"] for t in after) > 0, (up_at, stop_at, ticks)
