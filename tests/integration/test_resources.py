"""Broker resources sampled for real: a short run on two local RabbitMQ members records each
member's memory and high watermark, disk, file descriptors and network bytes every second from
its own Prometheus endpoint; a memory alarm set off during the run shows in the members rows and
the step table, and memory.png is drawn from the rows."""

import json

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.plots import run_figures, save
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_rows
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration

ALARM_AT_S, ALARM_S = 4, 8  # rabbitmqctl takes 2-7 s a call here: the alarm ends in the hold


@pytest.fixture(scope="module")
def two(state_root):
    """Two members, one quorum queue on both."""
    topology = TopologySpec.model_validate({
        "name": "res2", "members": 2, "start": 2, "cpu_per_member": 0.5, "port_base": 10000,
        "queues": [{"name": "work", "type": "quorum",
                    "arguments": {"x-quorum-initial-group-size": 2}}]})
    with local_cluster(topology, state_root) as provisioner:
        yield provisioner


def test_memory_watermark_and_alarm_are_recorded_per_member_and_second(two, tmp_path):
    spec = ScenarioSpec.model_validate({
        "name": "it-resources", "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "work", "senders": 2, "receivers": 2, "confirms": True,
                     "message": {"size": "1KiB", "persistent": True}},
        "plan": [{"rate_per_sender": 50, "hold": "32s"}],
        "faults": [{"kind": "memory_alarm", "at": f"{ALARM_AT_S}s", "duration": f"{ALARM_S}s"}],
        "measure": {"settle": "2s", "drain": "15s"}})
    result = Controller(spec, two.topology, tmp_path, live=False, keep_topology=True).run()
    assert result.outcome == "completed"
    run_dir = result.run_dir
    events = [json.loads(line) for line in (run_dir / "events.jsonl").open()]
    t0 = next(e["t"] for e in events if e["kind"] == "step")
    # rabbitmqctl takes seconds a call: each member's alarm goes on before the last member's
    # watermark was lowered (the memory_alarm event) and off by when the fault was cleared
    on = next(e["t"] for e in events if e["kind"] == "memory_alarm") - t0
    off = next(e["t"] for e in events if e["kind"] == "fault_cleared") - t0
    members = [r for r in read_rows(run_dir, "members") if r["running"]]
    names = {m.name for m in two.status() if m.running}
    assert {r["member"] for r in members} == names
    manifest = read_manifest(run_dir)
    (step,) = manifest.steps
    # the step names the limit it hit: the broker's alarm held the publishers
    assert step.bottleneck.startswith("publishers blocked by the broker"), step.bottleneck
    assert "memory alarm on" in step.bottleneck
    for name in names:
        rows = [r for r in members if r["member"] == name]
        known = [r for r in rows if r["memory_bytes"] is not None]
        assert len(known) >= 0.9 * len(rows) >= 15, (name, len(known), len(rows))
        assert all(r["memory_bytes"] > 20 << 20 and r["memory_limit_bytes"] > 0
                   and r["memory_percent_of_watermark"] == pytest.approx(
                       100 * r["memory_bytes"] / r["memory_limit_bytes"])
                   and r["disk_free_bytes"] > r["disk_free_limit_bytes"] > 0
                   and 0 < r["fds_open"] < r["fds_max"] for r in known), known[0]
        assert any(r["network_in_bytes"] for r in known)
        shown = [(r["elapsed_s"], r["memory_alarm"], r["memory_limit_bytes"]) for r in known]
        alarmed = [r for r in known if r["memory_alarm"]]
        first, last = alarmed[0]["elapsed_s"], alarmed[-1]["elapsed_s"]
        assert ALARM_AT_S < first <= on + 1 and off - ALARM_S < last <= off + 2, (on, off, shown)
        assert len(alarmed) >= ALARM_S - 1 and all(
            r["memory_alarm"] for r in known if first <= r["elapsed_s"] <= last), shown
        # the watermark figure follows the alarm by up to a second (the next memory poll)
        assert all(r["memory_percent_of_watermark"] > 100 for r in alarmed[1:]), shown
        assert max(r["memory_limit_bytes"] for r in known) > \
            100 * min(r["memory_limit_bytes"] for r in known)
        in_step = [r for r in known if step.start_s < r["elapsed_s"] <= step.end_s]
        assert step.memory_alarm_seconds[name] == sum(r["memory_alarm"] for r in in_step) > 0
        assert step.memory_percent[name] == max(r["memory_percent_of_watermark"]
                                                for r in in_step) > 100
    figures = run_figures(read_rows(run_dir, "ticks"), read_rows(run_dir, "members"), events,
                          manifest.phases, manifest.steps, read_rows(run_dir, "hosts"))
    assert {"memory.png", "hosts.png", "connections.png"} <= set(figures)
    shaded = [p for p in figures["memory.png"].axes[0].patches
              if p.get_label() == "memory alarm"]
    assert shaded and sum(p.get_width() for p in shaded) >= ALARM_S - 1
    save(figures, run_dir / "analysis")
    assert (run_dir / "analysis" / "memory.png").stat().st_size > 10_000


def test_the_members_client_traffic_is_measured_and_a_full_link_is_named(two, tmp_path):
    """Two senders of 8 KiB messages at 100 msg/s each: about 13 Mb/s into the members
    together and as much out to the receivers. Each member's link is given as 4 Mb/s, so a
    member carrying a sender or a receiver is at its link: the step names the network."""
    spec = ScenarioSpec.model_validate({
        "name": "it-network", "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "work", "senders": 2, "receivers": 2,
                     "message": {"size": "8KiB"}},
        "plan": [{"rate_per_sender": 100, "hold": "14s"}],
        "measure": {"settle": "3s", "drain": "10s"}})
    topology = two.topology.model_copy(update={"network_mbps": 4.0})
    result = Controller(spec, topology, tmp_path, live=False, keep_topology=True).run()
    assert result.outcome == "completed"
    (step,) = read_manifest(result.run_dir).steps
    expected = step.received_rate * 8192 * 8 / 1e6  # the bodies alone, without framing
    traffic_in, traffic_out = sum(step.network_in_mbps.values()), \
        sum(step.network_out_mbps.values())
    assert expected * 0.9 < traffic_in < expected * 1.3, (expected, step.network_in_mbps)
    assert expected * 0.9 < traffic_out < expected * 1.3, (expected, step.network_out_mbps)
    assert step.network_link_mbps == dict.fromkeys(step.network_in_mbps, 4.0)
    assert "network: member surge-res2-" in step.bottleneck, step.bottleneck
    rows = [r for r in read_rows(result.run_dir, "members") if r["running"]]
    assert all(r["network_link_mbps"] == 4.0 for r in rows)
    assert sum(r["network_in_mbps"] is not None for r in rows) >= 0.8 * len(rows)
    figures = run_figures(read_rows(result.run_dir, "ticks"), rows, [], read_manifest(
        result.run_dir).phases, [step])
    assert "network.png" in figures
