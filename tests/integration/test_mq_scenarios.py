"""The shipped IBM MQ scenarios and campaigns run as they are, scaled down by ``--set``, on
emulated queue managers (tests/mqemu, NOT IBM MQ) provisioned over a real sshd on two loopback
hosts by the control command stand-ins, as tests/integration/test_mq_runs.py does: document
000's uniform cluster (its own topology, pointed at the loopback hosts), document 003's
requester sweep and document 004's queue-pair growth (request/reply, responders under
syncpoint, on a topology with the queues they need, written here), and the campaigns over
them. Each run ends with exact accounting: what was sent was received or is still queued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from results.rundir.manifest import read_manifest
from tests.mqemu import end_all, install_standins
from tests.sshd import missing, running_sshd

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("127.0.0.1", "127.0.1.2")  # two queue manager hosts behind one sshd
PORT_BASE = 9750  # each host's first queue manager listens here
EXPORTER_OFFSET = 20  # each queue manager's exporter listens 20 ports above it (9770...)
QUICK = ["measure.settle=1s", "measure.drain=15s"]  # every run here: seconds, not minutes


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd"), also=HOSTS[1:]) as server:
        yield server


@pytest.fixture
def standins(tmp_path) -> Iterator[Path]:
    bin_dir = install_standins(tmp_path / "bin", exporter_offset=EXPORTER_OFFSET)
    try:
        yield bin_dir
    finally:
        left = end_all(bin_dir)
    assert left == []  # surge took down every queue manager it started


def on_loopback(sshd, bin_dir: Path, tmp_path: Path, members: int) -> dict:
    """The ``ibmmq`` fields that put a uniform cluster's ``members`` queue managers on the two
    loopback hosts behind ``sshd``, run by the stand-ins in ``bin_dir``."""
    return {"port_base": PORT_BASE, "exporter_port_base": PORT_BASE + EXPORTER_OFFSET,
            "statistics_interval": 1, "bin_dir": str(bin_dir),
            "files_dir": str(tmp_path / "nfs1"),
            "hosts": [{"name": host, "members": max(1, members // len(HOSTS)),
                       "cpus": os.cpu_count()} for host in HOSTS[:max(1, min(2, members))]],
            "ssh": {"port": sshd.port, "user": sshd.user, "key_file": str(sshd.key_file),
                    "known_hosts": "strict", "known_hosts_file": str(sshd.known_hosts_file),
                    "connect_timeout": 5, "command_timeout": 60, "retries": 0}}


def request_reply_topology(sshd, bin_dir: Path, tmp_path: Path, queues: list[dict]) -> Path:
    """One emulated queue manager over SSH holding ``queues`` (request queues and the shared
    reply queues the requesters read): where document 003's and 004's loops run here."""
    spec = {"name": "mq-emu-request-reply", "broker": "ibmmq", "placement": "ssh",
            "members": 1, "start": 1, "queues": queues,
            "ibmmq": {"qm_prefix": "PERF", "qm_first": 0, "qm_digits": 1, "qm_group": "PERF",
                      "cluster": "PERF", "repositories": ["PERF0"],
                      **on_loopback(sshd, bin_dir, tmp_path, 1)}}
    path = tmp_path / "request-reply-topology.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sets(overrides: dict) -> list[str]:
    """``--set`` arguments of ``overrides`` (values as JSON, which YAML reads)."""
    return [arg for key, value in overrides.items()
            for arg in ("--set", f"{key}={value if isinstance(value, str) else json.dumps(value)}")]


def environment(tmp_path: Path, library: Path) -> dict[str, str]:
    """A subprocess environment whose MQI library is the emulator's."""
    return {**os.environ, "LD_LIBRARY_PATH": str(library.parent), "MQIPY_NOOTEL": "1",
            "SURGE_STATE_DIR": str(tmp_path / "state")}


def surge(args: list[str], tmp_path: Path, library: Path) -> subprocess.CompletedProcess:
    """``surge ARGS`` in a fresh process on the emulator; it must succeed."""
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args],
                          env=environment(tmp_path, library), cwd=ROOT, capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def surge_run(scenario: str, overrides: dict, tmp_path: Path, library: Path) -> dict:
    """``surge run --no-live --json`` of a shipped scenario with ``overrides``; its JSON."""
    done = surge(["run", str(ROOT / scenario), *sets(overrides), "--no-live", "--json",
                  "--runs-dir", str(tmp_path / "runs"), "--metrics-port", "0", "--web", "off",
                  "--no-analyze"], tmp_path, library)
    return json.loads(done.stdout)


def assert_exact(accounting: dict) -> None:
    """Everything sent was received or is still queued; nothing lost."""
    assert accounting["balanced"] and accounting["lost"] == 0, accounting
    assert accounting["sent"] > 0, accounting
    assert accounting["sent"] == accounting["received"] + accounting["still_queued"], accounting


def assert_emulated(run_dir: Path) -> None:
    manifest = read_manifest(run_dir)
    assert manifest.broker.emulated and manifest.headings()[0].startswith("Broker: emulated MQ")


def test_the_uniform_cluster_scaling_scenario_runs_scaled_down_on_its_own_topology(
        sshd, standins, mqemu_library, tmp_path):
    """scenarios/mq-uniform-cluster-scaling.yaml on topologies/mq-uc01-uniform.yaml with its
    hosts pointed at loopback: 4 queue managers instead of 12, 4 senders instead of 180,
    seconds per step."""
    ibmmq = on_loopback(sshd, standins, tmp_path, 4)
    overrides = {"workload.senders": 4, "workload.receivers": 4,
                 "plan.0.hold": "3s", "plan.1.rate_per_sender": 40, "plan.1.hold": "3s",
                 "plan.2.rate_per_sender": "+40", "plan.2.hold": "3s", "plan.2.repeat": 1,
                 "scaling.pool": 4, "scaling.scale_out.cooldown": "3s",
                 "topology.members": 4, "topology.cpu_per_member": 1,
                 "topology.ibmmq.repositories": ["UC01QM01", "UC01QM03"],
                 **{f"topology.ibmmq.{key}": value for key, value in ibmmq.items()},
                 **dict(o.split("=") for o in QUICK)}
    document = surge_run("scenarios/mq-uniform-cluster-scaling.yaml", overrides, tmp_path,
                         mqemu_library)
    assert document["outcome"] == "completed"
    accounting = document["accounting"]
    assert_exact(accounting)
    assert accounting["still_queued"] == 0  # the receivers kept up at 320 msg/s at most
    assert [row["target_rate"] for row in document["steps"]
            if not row["missing_seconds"]][-1] == 4 * 80
    assert_emulated(Path(document["run_dir"]))


def test_the_native_ha_requester_sweep_runs_its_loop_on_an_emulated_queue_manager(
        sshd, standins, mqemu_library, tmp_path):
    """scenarios/mq-native-ha-requester-sweep.yaml's requester/responder loop (request%d
    queues, replies on reply%d by correlation id, responders under syncpoint) on an emulated
    PERF0 instead of the Native HA queue manager: 1, 2, 4 requesters, 2 s each."""
    topology = request_reply_topology(sshd, standins, tmp_path, [
        {"name": "request%d", "count": 2}, {"name": "reply%d", "count": 2}])
    overrides = {"topology": str(topology), "workload.senders": 4, "workload.receivers": 4,
                 "plan.0.senders": [1, 2, 4], "plan.0.hold": "2s",
                 **dict(o.split("=") for o in QUICK)}
    document = surge_run("scenarios/mq-native-ha-requester-sweep.yaml", overrides, tmp_path,
                         mqemu_library)
    assert document["outcome"] == "completed"
    print(json.dumps(document["accounting"]), json.dumps(document["steps"]))
    assert_exact(document["accounting"])
    assert_emulated(Path(document["run_dir"]))
