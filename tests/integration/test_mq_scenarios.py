"""The shipped IBM MQ scenarios and campaigns run as they are, scaled down by ``--set``, on
emulated queue managers (tests/mqemu, NOT IBM MQ) provisioned over a real sshd on two loopback
hosts by the control command stand-ins, as tests/integration/test_mq_runs.py does: document
000's uniform cluster (its own topology, pointed at the loopback hosts), document 003's
requester sweep and document 004's queue-pair growth (request/reply, responders under
syncpoint, on a topology with the queues they need, written here), and the campaigns over
them. Each run ends with exact accounting: what was sent was received or is still queued."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from results.rundir.manifest import RunManifest, read_manifest
from tests.integration.mq_emulated import (
    ROOT,
    RUN_FLAGS,
    on_loopback,
    sshd,
    standins_in,
    surge,
)
from tests.sshd import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

PORT_BASE = 9750  # each host's first queue manager listens here
EXPORTER_OFFSET = 20  # each queue manager's exporter listens 20 ports above it (9770...)
QUICK = {"measure.settle": "1s", "measure.drain": "15s"}  # every run here: seconds
SWEEP_QUEUES = [{"name": "request%d", "count": 2}, {"name": "reply%d", "count": 2}]
PAIRS = {"workload.queue": "PAIR%d", "workload.senders": 12,  # 6 requesters per pair
         "workload.receivers": 4,  # 2 responders per pair, started with it
         "plan.0.senders": [6, 12], "plan.0.receivers": [2, 4], "plan.0.hold": "2s"}


__all__ = ["sshd"]  # mq_emulated's fixture, used here as it is


@pytest.fixture
def standins(tmp_path) -> Iterator[Path]:
    with standins_in(tmp_path / "bin", EXPORTER_OFFSET) as bin_dir:
        yield bin_dir


def request_reply_topology(sshd, bin_dir: Path, tmp_path: Path, queues: list[dict]) -> Path:
    """One emulated queue manager over SSH holding ``queues`` (request queues and the shared
    reply queues the requesters read): where document 003's and 004's loops run here."""
    spec = {"name": "mq-emu-request-reply", "broker": "ibmmq", "placement": "ssh",
            "members": 1, "start": 1, "queues": queues,
            "ibmmq": {"qm_prefix": "PERF", "qm_first": 0, "qm_digits": 1, "qm_group": "PERF",
                      "cluster": "PERF", "repositories": ["PERF0"],
                      **on_loopback(sshd, bin_dir, tmp_path, 1, PORT_BASE, EXPORTER_OFFSET)}}
    path = tmp_path / "request-reply-topology.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sets(overrides: dict) -> list[str]:
    """``--set`` arguments of ``overrides`` (values as JSON, which YAML reads)."""
    return [arg for key, value in overrides.items()
            for arg in ("--set", f"{key}={value if isinstance(value, str) else json.dumps(value)}")]


def surge_run(scenario: str, overrides: dict, tmp_path: Path, library: Path
              ) -> tuple[dict, RunManifest]:
    """``surge run --no-live --json`` of a shipped scenario with ``overrides``: its JSON and
    its run.json."""
    done = surge(["run", str(ROOT / scenario), *sets(overrides), "--runs-dir",
                  str(tmp_path / "runs"), *RUN_FLAGS], tmp_path, library, timeout_s=280)
    document = json.loads(done.stdout)
    return document, read_manifest(Path(document["run_dir"]))


def assert_exact(manifest: RunManifest) -> None:
    """A completed run on emulated MQ: everything sent was received or is still queued (read
    by runmqsc on the queue managers), nothing lost."""
    assert manifest.outcome == "completed"
    assert manifest.broker.emulated and manifest.headings()[0].startswith("Broker: emulated MQ")
    accounting = manifest.accounting
    print(f"{manifest.scenario['name']}: {accounting.explain}")
    assert accounting.balanced and accounting.lost == 0 and accounting.sent > 0, accounting
    assert accounting.sent == accounting.received + accounting.still_queued, accounting


def assert_answered(manifest: RunManifest) -> None:
    """:func:`assert_exact` of a request/reply run: every request the responders took was
    answered, every reply matched its requester's request by correlation id, none late."""
    assert_exact(manifest)
    details = manifest.accounting_details
    print(f"  served {details['served']}, round trips {details['round_trips']}, unmatched "
          f"{details['unmatched']}, timeouts {details['timeouts']}")
    assert details["served"] == details["round_trips"] == manifest.accounting.received, details
    assert (details["unmatched"], details["timeouts"]) == (0, 0), details


def test_the_uniform_cluster_scaling_scenario_runs_scaled_down_on_its_own_topology(
        sshd, standins, mqemu_library, tmp_path):
    """scenarios/mq-uniform-cluster-scaling.yaml on topologies/mq-uc01-uniform.yaml with its
    hosts pointed at loopback: 4 queue managers instead of 12, 4 senders instead of 180, its
    three kinds of step for 3 s each (1, 40, +40 msg/s per sender: one queue manager carries
    that, so nothing scales out here; test_mq_runs.py scales out)."""
    ibmmq = on_loopback(sshd, standins, tmp_path, 4, PORT_BASE, EXPORTER_OFFSET)
    overrides = {"workload.senders": 4, "workload.receivers": 4,
                 "plan.0.hold": "3s", "plan.1.rate_per_sender": 40, "plan.1.hold": "3s",
                 "plan.2.rate_per_sender": "+40", "plan.2.hold": "3s", "plan.2.repeat": 1,
                 "scaling.pool": 4, "scaling.scale_out.cooldown": "3s",
                 "topology.members": 4,
                 "topology.ibmmq.repositories": ["UC01QM01", "UC01QM03"],
                 **{f"topology.ibmmq.{key}": value for key, value in ibmmq.items()}, **QUICK}
    document, manifest = surge_run("scenarios/mq-uniform-cluster-scaling.yaml", overrides,
                                   tmp_path, mqemu_library)
    assert_exact(manifest)
    assert manifest.accounting.still_queued == 0  # the receivers kept up with 320 msg/s
    measured = [row for row in document["steps"] if not row["missing_seconds"]]
    assert [row["target_rate"] for row in measured][-1] == 4 * 80  # the last step: +40 each
    assert all(row["members"] >= 1 for row in measured)


def test_the_native_ha_requester_sweep_runs_its_loop_on_an_emulated_queue_manager(
        sshd, standins, mqemu_library, tmp_path):
    """scenarios/mq-native-ha-requester-sweep.yaml's requester/responder loop (request%d
    queues, replies on reply%d by correlation id, responders under syncpoint) on an emulated
    PERF0 instead of the Native HA queue manager: 1, 2, 4 requesters, 2 s each."""
    topology = request_reply_topology(sshd, standins, tmp_path, SWEEP_QUEUES)
    overrides = {"topology": str(topology), "workload.senders": 4, "workload.receivers": 4,
                 "plan.0.senders": [1, 2, 4], "plan.0.hold": "2s", **QUICK}
    document, manifest = surge_run("scenarios/mq-native-ha-requester-sweep.yaml", overrides,
                                   tmp_path, mqemu_library)
    assert_answered(manifest)
    assert [phase.senders for phase in manifest.phases] == [1, 2, 4]  # requesters
    assert {row["step"] for row in document["steps"]} == {1, 2, 3}, document["steps"]


def pair_topology(sshd, bin_dir: Path, tmp_path: Path) -> Path:
    """Two of document 004's queue pairs on one emulated queue manager (the 12 requesters and
    4 responders of ``PAIRS`` fill them in blocks, 6 and 2 a pair): request queues PAIR1 and
    PAIR2 (``pair-%d`` is no MQ name: MQ names have no ``-``) and the shared reply queues
    PAIR1.REPLY and PAIR2.REPLY the requesters read."""
    return request_reply_topology(sshd, bin_dir, tmp_path, [
        {"name": "PAIR%d", "count": 2}, {"name": "PAIR%d.REPLY", "count": 2}])


def test_the_zos_queue_pair_growth_runs_on_an_emulated_queue_manager(
        sshd, standins, mqemu_library, tmp_path):
    """scenarios/zos-queue-pair-growth.yaml on MQ: 1 then 2 queue pairs (6 requesters each,
    2 responders per pair under syncpoint), 3 s each (two measured seconds: the responders of
    a step are counted from the agents' readings, and one alone can be missed on a busy
    machine)."""
    document, manifest = surge_run("scenarios/zos-queue-pair-growth.yaml", {
        "topology": str(pair_topology(sshd, standins, tmp_path)), **PAIRS, "plan.0.hold": "3s",
        **QUICK}, tmp_path, mqemu_library)
    assert_answered(manifest)
    assert [phase.senders for phase in manifest.phases] == [6, 12]  # 1 then 2 pairs
    assert [row["receivers"] for row in document["steps"] if row["step"]] == [2, 4]
    assert {row["step"] for row in document["steps"]} == {1, 2}, document["steps"]


def surge_campaign(campaign: str, overrides: dict, tmp_path: Path, library: Path
                   ) -> list[RunManifest]:
    """``surge campaign`` of a shipped campaign with ``overrides`` for every cell (no
    analysis) on the request/reply topology written here; every cell done and nothing lost by
    the campaign's verdict; each cell's run.json in cell order."""
    root = tmp_path / "campaigns"
    surge(["campaign", str(ROOT / campaign), *sets(overrides), "--campaigns-dir", str(root),
           "--no-analyze", "--metrics-port", "0", "--web", "off"], tmp_path, library)
    (directory,) = root.iterdir()
    state = json.loads((directory / "campaign.json").read_text())
    cells = state["cells"]
    assert cells and all(cell["status"] == "done" for cell in cells), cells
    # the campaign's requirement: nothing lost; a second or two per step on a loaded machine
    # may leave a rate unknown (an agent's figures late), which fails the rate part only
    assert all(cell["passed"] or all(" rate unknown " in part for part in
                                     cell["reason"].split("; ")) for cell in cells), cells
    assert all(cell["topology"] == "mq-emu-request-reply" for cell in cells)  # the --set one
    return [read_manifest(directory / cell["id"]) for cell in cells]


def test_the_zos_queue_pairs_campaign_runs_every_message_size_on_emulated_mq(
        sshd, standins, mqemu_library, tmp_path):
    """campaigns/zos-queue-pairs.yaml on MQ: its 2 KiB, 64 KiB and 4 MiB cells, each 2 queue
    pairs for 3 s (two measured seconds: one alone can miss an agent's report on a busy
    machine), on one emulated queue manager brought up once for the three."""
    manifests = surge_campaign("campaigns/zos-queue-pairs.yaml", {
        "topology": str(pair_topology(sshd, standins, tmp_path)), **PAIRS,
        "plan.0.senders": [12], "plan.0.receivers": [4], "plan.0.hold": "3s", **QUICK},
        tmp_path, mqemu_library)
    assert [m.scenario["workload"]["message"]["size"] for m in manifests] == \
        [2048, 65536, 4 * 1024 * 1024]
    for manifest in manifests:
        assert_answered(manifest)


def test_the_native_ha_message_sizes_campaign_runs_its_matrix_on_emulated_mq(
        sshd, standins, mqemu_library, tmp_path):
    """campaigns/native-ha-message-sizes.yaml (document 003's matrix of the requester sweep:
    2K/20K/200K x persistent or not) on MQ: 2 requesters for 2 s per cell. Its
    scenario's ``request-%d`` is no MQ name: ``request%d`` here, as in
    scenarios/mq-native-ha-requester-sweep.yaml."""
    topology = request_reply_topology(sshd, standins, tmp_path, SWEEP_QUEUES)
    manifests = surge_campaign("campaigns/native-ha-message-sizes.yaml", {
        "topology": str(topology), "workload.queue": "request%d", "workload.senders": 2,
        "workload.receivers": 2, "plan.0.senders": [2], "plan.0.hold": "2s", **QUICK},
        tmp_path, mqemu_library)
    assert [(m.scenario["workload"]["message"]["persistent"],
             m.scenario["workload"]["message"]["size"]) for m in manifests] == \
        [(persistent, size) for persistent in (False, True)
         for size in (2048, 20 * 1024, 200 * 1024)]
    for manifest in manifests:
        assert_answered(manifest)
