"""Where the broker balances its clients itself (an IBM MQ uniform cluster: reconnectable
applications of a QM group), the controller starts and stops members and sends no moves."""

import json

from drivers import protocol
from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.fakes import FakeClock, MemoryLauncher, ScriptedProvisioner, idle_host, no_probe


class BalancingProvisioner(ScriptedProvisioner):
    """Members whose cluster moves the clients between them, as MQ's uniform cluster does."""

    balances_clients = True


def run(tmp_path, provisioner_type):
    topology = TopologySpec(name="mem", members=2, start=1, cpu_per_member=1.0,
                            queues=[QueueSpec(name="perf")])
    rules = {"scale_out": {"when_any": [{"member_cpu": "80%", "for": "3s"}],
                           "cooldown": "4s"}}
    spec = ScenarioSpec.model_validate({
        "name": "loop", "topology": "mem.yaml",
        "workload": {"queue": "perf", "senders": 4, "receivers": 4},
        "plan": [{"rate_per_sender": 50, "hold": "16s"}], "measure": {"settle": 1, "drain": 5},
        "scaling": {"pool": 2, **rules}})
    clock = FakeClock()
    provisioner = provisioner_type(topology, clock, 0.9)
    launcher = MemoryLauncher(2, clock)
    controller = Controller(spec, topology, tmp_path, live=False, provisioner=provisioner,
                            launcher=launcher, clock=clock, host_cpu=idle_host,
                            probes=no_probe, preflights=no_probe, background=False,
                            sd_dir=tmp_path / "sd")
    controller.run()
    events = [json.loads(line) for line in
              (controller.run_dir / "events.jsonl").read_text().splitlines()]
    moves = [c for a in launcher.agents for c in a.calls if isinstance(c, protocol.Move)]
    return provisioner, events, moves


def test_the_controller_starts_a_queue_manager_and_moves_no_client(tmp_path):
    provisioner, events, moves = run(tmp_path, BalancingProvisioner)
    assert provisioner.started == [1]
    assert moves == []
    kinds = [e["kind"] for e in events]
    assert "member_started" in kinds and "rebalanced" not in kinds
    started = next(e for e in events if e["kind"] == "member_started")
    assert "moves clients to it itself" in started["explain"]


def test_the_same_run_with_a_broker_that_does_not_balance_moves_clients(tmp_path):
    provisioner, events, moves = run(tmp_path, ScriptedProvisioner)
    assert provisioner.started == [1] and moves
    assert "rebalanced" in [e["kind"] for e in events]
