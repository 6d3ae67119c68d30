"""``surge run`` of document 002's workload balancing on emulated queue managers (tests/mqemu,
NOT IBM MQ): a uniform cluster whose queue is a cluster queue (``ibmmq.cluster_queues``), an
instance on each of three running queue managers, provisioned over a real sshd by the control
command stand-ins; four senders open it bound on open or not fixed (``workload.bind``), and MQ's
cluster workload balancing, not surge, spreads the messages. Bound on open, each sender's
messages go to one instance, so four senders cannot fill three instances evenly; not fixed,
every message goes to the next instance in turn (document 002, 8.4.1-8.4.3). The receivers are
slowed (2 s a message) so that each instance still holds what MQ put there when the run reads
the depths (``runmqsc`` on every queue manager), and the accounting is exact: sent = received
+ still queued."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.integration.test_mq_runs import (
    EXPORTER_OFFSET,
    sshd,
    standins,
    surge_run,
    uniform_topology,
)
from tests.sshd import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

__all__ = ["sshd", "standins"]  # the fixtures of test_mq_runs.py, used here as they are
PORT_BASE = 9650  # this test's queue managers listen on 9650, 9651 (host 1) and 9650 (host 2)
EXPORTERS = PORT_BASE + EXPORTER_OFFSET  # their exporters (the stand-ins start them)
SENDERS, RATE, HOLD_S = 4, 50, 4


def cluster_topology(sshd, bin_dir: Path, tmp_path: Path, reconnect: str) -> Path:
    """test_mq_runs.py's uniform cluster of 4 queue managers over two hosts, 3 started, its
    queue PERF a cluster queue, its clients reconnecting as ``reconnect`` says."""
    path = uniform_topology(sshd, bin_dir, tmp_path, members=4)
    spec = yaml.safe_load(path.read_text())
    spec.update(name="mq-emu-balance", start=3, queues=[{"name": "PERF"}])
    spec["ibmmq"].update(port_base=PORT_BASE, exporter_port_base=EXPORTERS, cluster_queues=True,
                         reconnect=reconnect)
    path.write_text(yaml.safe_dump(spec))
    return path


def instance_depths(run_dir: Path) -> dict[str, int]:
    """Each queue manager's depth of PERF as the run last read it (runmqsc, in events.jsonl)."""
    depths = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        found = re.search(r"runmqsc -e (\S+)", event.get("command", ""))
        depth = re.search(r"QUEUE\(PERF\).*?CURDEPTH\((\d+)\)", event.get("stdout", ""), re.S)
        if event["kind"] == "remote_command" and found and depth:
            depths[found.group(1)] = int(depth.group(1))
    return depths


@pytest.mark.parametrize("bind", ["on-open", "not-fixed"])
def test_bind_on_open_leaves_instances_uneven_and_not_fixed_spreads_every_message(
        sshd, standins, mqemu_library, tmp_path, bind):
    scenario = {"name": f"mq-emu-balance-{bind}", "agents": 1,
                # bound on open, clients that reconnect anywhere are refused (MQ's 2547)
                "topology": str(cluster_topology(sshd, standins, tmp_path,
                                                 "qmgr" if bind == "on-open" else "yes")),
                "workload": {"pattern": "point-to-point", "queue": "PERF", "senders": SENDERS,
                             "receivers": 3, "message": {"size": "1KiB"}, "bind": bind},
                "consumer_profile": ["2s:60s"],
                "plan": [{"rate_per_sender": RATE, "hold": f"{HOLD_S}s"}],
                "measure": {"settle": "1s", "drain": "2s"}}
    document = surge_run(scenario, tmp_path, mqemu_library)
    accounting = document["accounting"]
    assert accounting["balanced"] and accounting["lost"] == 0, accounting
    assert accounting["sent"] >= SENDERS * RATE * (HOLD_S - 1)
    assert accounting["received"] + accounting["still_queued"] == accounting["sent"]
    depths = instance_depths(Path(document["run_dir"]))
    assert sorted(depths) == ["UC01QM01", "UC01QM02", "UC01QM03"]
    assert sum(depths.values()) == accounting["still_queued"]
    assert accounting["received"] < accounting["sent"] // 10  # the instances keep the spread
    # the senders say where MQ put each message: every put, each instance at least its depth
    recorded = json.loads((Path(document["run_dir"]) / "run.json").read_text())
    put = recorded["destinations"]
    assert set(put) <= set(depths) and sum(put.values()) == accounting["sent"], put
    assert all(put.get(name, 0) >= depth for name, depth in depths.items()), (put, depths)
    sequence = recorded["destination_sequence"]
    assert len(sequence) == 24 and set(sequence) <= set(depths), sequence
    if bind == "not-fixed":  # every sender's puts turn over the instances
        assert set(sequence) == set(depths), sequence
    low, high = min(depths.values()), max(depths.values())
    if bind == "on-open":  # 4 handles over 3 instances: one has twice another's, or more
        assert high >= 1.8 * low, depths
    else:  # each queue manager turns its puts over all 3; receivers took a few
        assert high - low <= max(10, accounting["received"] + 2 * SENDERS), depths
