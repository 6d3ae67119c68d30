"""Where the broker balances its clients itself (an IBM MQ uniform cluster: reconnectable
applications of a QM group), the controller starts and stops members and sends no moves."""

import json

from drivers import protocol
from orchestrator.run.controller import Controller
from orchestrator.scaling import scaler
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


class PlacingProvisioner(BalancingProvisioner):
    """A balancing broker that reports where the clients are: all on m0 until the
    ``moved_after``-th question after m1 started, then half on each (never, with None)."""

    moved_after: int | None = 2

    def __init__(self, *args):
        super().__init__(*args)
        self.asked = 0

    def client_placement(self) -> dict[str, dict[str, int]]:
        running = [f"m{i}" for i, up in enumerate(self.running) if up]
        if len(running) < 2:
            return {"m0": {"sender": 4, "receiver": 4}}
        self.asked += 1
        if self.moved_after is None or self.asked <= self.moved_after:
            return {"m0": {"sender": 4, "receiver": 4}, "m1": {"sender": 0, "receiver": 0}}
        return {"m0": {"sender": 2, "receiver": 2}, "m1": {"sender": 2, "receiver": 2}}


class NeverPlacingProvisioner(PlacingProvisioner):
    moved_after = None


def test_after_a_member_starts_surge_records_where_the_broker_put_the_clients(tmp_path):
    provisioner, events, moves = run(tmp_path, PlacingProvisioner)
    assert moves == []
    placed = [e for e in events if e["kind"] == "clients_placed"]
    assert len(placed) == 1 and placed[0]["member"] == "m1"
    assert placed[0]["placement"] == {"m0": {"sender": 2, "receiver": 2},
                                      "m1": {"sender": 2, "receiver": 2}}
    assert placed[0]["seconds"] == 2 * scaler.BALANCE_POLL_S  # asked three times
    assert placed[0]["explain"].startswith("m1 holds 4 of 8 client connections")


def test_a_broker_that_does_not_balance_in_time_is_recorded_as_such(tmp_path):
    provisioner, events, moves = run(tmp_path, NeverPlacingProvisioner)
    placed = next(e for e in events if e["kind"] == "clients_placed")
    assert placed["seconds"] >= scaler.BALANCE_WAIT_S
    assert placed["explain"].endswith("(the broker has not balanced them yet)")
    assert placed["placement"]["m1"] == {"sender": 0, "receiver": 0}


def test_a_member_must_hold_each_application_with_as_many_clients_as_members():
    assert scaler.spread_to({"a": {"s": 1, "r": 2}, "b": {"s": 1, "r": 0}}, "b") is False
    assert scaler.spread_to({"a": {"s": 1, "r": 2}, "b": {"s": 1, "r": 0}, "c": {}}, "b")
    assert scaler.spread_to({"a": {"s": 3}, "b": {}}, "b") is False
