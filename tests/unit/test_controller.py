"""The run loop on a fake clock, with in-memory agents and a scripted provisioner: whole plans
in milliseconds, every figure known in advance."""

import json

import pytest

from drivers import protocol
from drivers.base import Unchecked
from orchestrator.errors import ProvisionError
from orchestrator.run.controller import Controller
from orchestrator.run.depth import QueueDepth
from orchestrator.run.sampling import Tick
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from results.rundir.histogram import LatencyHistogram
from tests.fakes import FakeClock, MemoryLauncher, ScriptedProvisioner, idle_host, no_probe
from topologies.base import BrokerSample, MemberSample


def topology(**fields) -> TopologySpec:
    values = {"name": "mem", "members": 2, "start": 1, "cpu_per_member": 1.0,
              "queues": [QueueSpec(name="perf")]} | fields
    return TopologySpec(**values)


def scenario(plan, senders=2, receivers=2, **fields) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "loop", "topology": "mem.yaml",
        "workload": {"queue": "perf", "senders": senders, "receivers": receivers},
        "plan": plan, "measure": {"settle": 1, "drain": 5}, **fields})


def run(spec: ScenarioSpec, topo: TopologySpec, tmp_path, agents=2, cpu_share=0.5,
        slow_sample_s=0.0, preflights=no_probe, launcher=None, process_cpu=None, clock=None):
    clock = clock or FakeClock()
    provisioner = ScriptedProvisioner(topo, clock, cpu_share)
    provisioner.slow_sample_s = slow_sample_s
    launcher = launcher or MemoryLauncher(agents, clock)
    controller = Controller(spec, topo, tmp_path, live=False, provisioner=provisioner,
                            launcher=launcher, clock=clock, host_cpu=idle_host,
                            probes=no_probe, preflights=preflights, background=False,
                            sd_dir=tmp_path / "sd",
                            **({"process_cpu": process_cpu} if process_cpu else {}))
    result = controller.run()
    manifest = json.loads((result.run_dir / "run.json").read_text())
    return result, controller, provisioner, launcher, manifest


def test_a_two_step_plan_runs_on_fake_time_and_every_row_has_its_rate(tmp_path):
    spec = scenario([{"rate_per_sender": 100, "hold": "5s"},
                     {"rate_per_sender": 200, "hold": "5s"}])
    result, controller, provisioner, launcher, manifest = run(spec, topology(), tmp_path)
    assert result.outcome == "completed"
    running = [t for t in controller.ticks if t["phase"]]
    assert [t["phase"] for t in running] == [1] * 4 + [2] * 5
    # 2 senders at the plan's rate, spread over 2 agents: each row's rate is what was asked
    # over the second it covers (the second before the row; a new rate applies from its tick)
    sent = [t["send_rate"] for t in running]
    asked = [t["target_rate"] for t in running]
    assert sent == pytest.approx([asked[0], *asked[:-1]])
    assert {t["target_rate"] for t in running} == {200.0, 400.0}
    assert [s.achieved_rate for s in result.steps] == pytest.approx([200.0, 400.0])
    assert all(t["lateness_s"] == 0 for t in controller.ticks)
    assert all(t["latency_p99_ms"] == pytest.approx(2.0, rel=0.05)
               for t in running[1:])
    # member CPU: half of its 1-core quota, as scripted
    cpu = [r["cpu_percent"] for r in controller.member_rows if r["member"] == "m0"][1:]
    assert cpu == pytest.approx([50.0] * len(cpu))
    assert manifest["outcome"] == "completed" and manifest["accounting"]["balanced"]
    assert launcher.stopped and provisioner.downs == 1
    assert manifest["prometheus"]["controller"].startswith("127.0.0.1:")
    assert not list((tmp_path / "sd").iterdir())  # the targets file goes with the run


def test_workers_are_placed_and_rates_sent_as_typed_messages(tmp_path):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"},
                     {"rate_per_sender": 20, "hold": "2s", "senders": 1}], senders=3,
                    receivers=1)
    _, _, _, launcher, _ = run(spec, topology(), tmp_path)
    configs = [a.calls[0] for a in launcher.agents]
    # the receiver on agent 0, the senders from agent 1 on
    assert [[s.producer_id for s in c.senders] for c in configs] == [[2], [1, 3]]
    assert [[r.id for r in c.receivers] for c in configs] == [[1], []]
    assert all(isinstance(c, protocol.Configure) and c.destination.queue == "perf"
               for c in configs)
    rates = [c for c in launcher.agents[0].calls if isinstance(c, protocol.Rate)]
    assert rates == [protocol.Rate(10.0, None), protocol.Rate(20.0, 1)]


def test_the_run_records_the_controllers_own_cpu_over_the_load(tmp_path):
    spec = scenario([{"rate_per_sender": 100, "hold": "5s"}])
    clock = {"cpu": 0.0}

    def process_cpu():  # a tenth of a CPU-second each time it is read
        clock["cpu"] += 0.1
        return clock["cpu"]
    _, _, _, _, manifest = run(spec, topology(), tmp_path, process_cpu=process_cpu)
    sampling = manifest["sampling"]
    assert sampling["load_s"] == pytest.approx(5.0, abs=1.0)
    assert sampling["controller_cpu_percent"] == pytest.approx(10.0 / sampling["load_s"])


def test_a_late_tick_skips_the_seconds_it_missed(tmp_path):
    spec = scenario([{"rate_per_sender": 100, "hold": "8s"}])
    _, controller, _, _, manifest = run(spec, topology(), tmp_path, slow_sample_s=2.5)
    assert manifest["sampling"]["ticks_skipped"] > 0
    elapsed = [t["elapsed_s"] for t in controller.ticks if t["phase"]]
    assert all(b - a >= 1.0 for a, b in zip(elapsed, elapsed[1:], strict=False))
    # the rate is still each agent's delta over its own interval: never above the target
    assert all(t["send_rate"] is None or t["send_rate"] <= t["target_rate"] + 1e-6
               for t in controller.ticks if t["phase"])


def test_the_scaler_starts_a_member_on_high_cpu_and_moves_a_fair_share_to_it(tmp_path):
    spec = scenario([{"rate_per_sender": 50, "hold": "12s"}], senders=4, receivers=4,
                    scaling={"pool": 2, "scale_out": {
                        "when_any": [{"member_cpu": "80%", "for": "3s"}], "cooldown": "60s"}})
    _, controller, provisioner, launcher, _ = run(spec, topology(), tmp_path, cpu_share=0.9)
    assert provisioner.started == [1]
    moves = [c for a in launcher.agents for c in a.calls if isinstance(c, protocol.Move)]
    assert moves and {m.endpoint for m in moves} == {provisioner.member(1).endpoint}
    assert sum(len(m.senders) for m in moves) == 2 and sum(len(m.receivers) for m in moves) == 2
    events = [json.loads(line)["kind"] for line in
              (controller.run_dir / "events.jsonl").read_text().splitlines()]
    assert events.index("scale_decision") < events.index("member_started") < \
        events.index("rebalanced")
    assert max(t["members_running"] for t in controller.ticks) == 2


class Preflight:
    """A check before any load that fails with ``error`` (none: all fine)."""

    def __init__(self, error: Exception | None = None):
        self.error, self.checked, self.closed = error, [], False

    def __call__(self, broker, endpoints, queues, settings) -> "Preflight":
        self.checked.append((broker, endpoints, queues))
        return self

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True


def test_queues_that_cannot_be_checked_are_said_so_and_the_run_goes_on(tmp_path):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"}])
    check = Preflight(Unchecked("no MQI library here"))
    result, controller, *_ = run(spec, topology(), tmp_path, preflights=check)
    assert result.outcome == "completed" and check.closed
    assert check.checked == [("rabbitmq", [controller.provisioner.member(0).endpoint], ["perf"])]
    events = [json.loads(line) for line in
              (controller.run_dir / "events.jsonl").read_text().splitlines()]
    unchecked = [e for e in events if e["kind"] == "queues_unchecked"]
    assert len(unchecked) == 1 and unchecked[0]["reason"] == "no MQI library here"
    assert "were NOT checked before the load" in unchecked[0]["explain"]


def test_checked_queues_leave_no_such_event(tmp_path):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"}])
    result, controller, *_ = run(spec, topology(), tmp_path, preflights=Preflight())
    kinds = (controller.run_dir / "events.jsonl").read_text()
    assert result.outcome == "completed" and "queues_unchecked" not in kinds


def test_a_missing_queue_stops_the_run_before_any_agent_is_configured(tmp_path):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"}])
    launcher = MemoryLauncher(2, FakeClock())
    with pytest.raises(ProvisionError, match="the workload's queues do not exist: perf"):
        run(spec, topology(), tmp_path, preflights=Preflight(LookupError("perf")),
            launcher=launcher)
    assert all(agent.calls == [] for agent in launcher.agents)  # no worker was configured
    assert launcher.begun and launcher.stopped  # the agents set starting were stopped
    run_json = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    assert run_json["outcome"] == "failed"


@pytest.mark.parametrize("broker, hint", [
    ("ibmmq", "define them on the queue managers before the run (DEFINE QLOCAL)"),
    ("rabbitmq", "existing.declare: true")])
def test_what_to_do_about_missing_queues_is_said_for_each_broker(broker, hint):
    topo, clock = topology(), FakeClock()
    provisioner = ScriptedProvisioner(topo, clock)
    depth = QueueDepth(broker, topo.queues[0], provisioner, clock, no_probe,
                       Preflight(LookupError("perf (at *UC01QM)")))
    with pytest.raises(ProvisionError) as error:
        depth.check(provisioner.up())
    assert str(error.value).startswith("the workload's queues do not exist: perf (at *UC01QM); ")
    assert hint in str(error.value)


def test_members_the_controller_cannot_reach_are_not_checked_and_it_says_why():
    topo, clock = topology(), FakeClock()
    provisioner = ScriptedProvisioner(topo, clock)
    provisioner.unreachable_from_controller = lambda: "the Services resolve in the cluster only"
    check = Preflight(ConnectionError("would have failed"))
    depth = QueueDepth("ibmmq", topo.queues[0], provisioner, clock, no_probe, check)
    assert depth.check(provisioner.up()) == "the Services resolve in the cluster only"
    assert check.checked == []


def test_the_scaler_sees_a_member_of_unknown_cpu_as_unknown_not_as_absent(tmp_path):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"}])
    controller = Controller(spec, topology(members=3), tmp_path, live=False,
                            provisioner=ScriptedProvisioner(topology(members=3), FakeClock()),
                            launcher=MemoryLauncher(1, FakeClock()), clock=FakeClock(),
                            probes=no_probe, preflights=no_probe, sd_dir=tmp_path / "sd")
    controller.broker = BrokerSample([MemberSample("m0", True, None, 2.0),
                                      MemberSample("m1", True, None, 2.0),
                                      MemberSample("m2", False, None, 2.0)])
    tick = Tick(5.0, {}, {}, LatencyHistogram(), member_cpu_percent={"m0": 150.0, "m1": None})
    row = {"send_rate": 10.0, "receive_rate": 9.0, "latency_p99_ms": None}
    seen = controller._observation(row, tick, 5.0, 10.0, None)
    assert seen.cpu_by_member() == {"m0": pytest.approx(0.75), "m1": None}  # m2 is stopped
