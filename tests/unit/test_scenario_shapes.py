"""Load shapes, workload patterns and fault schedules: how they expand, and the clear errors a
bad scenario gets before anything is provisioned."""

from pathlib import Path

import pytest

from orchestrator.errors import SpecError
from orchestrator.specs.loader import load_scenario
from orchestrator.specs.plan import delay_phases, expand, phase_at, value_at
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec

TOPOLOGY = """\
name: t1
members: 3
start: 3
queues:
  - {name: perf, type: quorum}
  - {name: "perf-test-%d", count: 100}
"""

SCENARIO = """\
name: s1
topology: topo.yaml
workload:
  queue: perf
  senders: 8
  receivers: 4
plan:
  - {rate_per_sender: 50, hold: 20s}
"""


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    return tmp_path


def errors(spec_dir: Path, text: str) -> str:
    path = spec_dir / "scen.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert str(path) in message
    return message


def test_unknown_fault_kind_lists_the_known_ones(spec_dir):
    message = errors(spec_dir, SCENARIO + "faults:\n  - {kind: unplug_member, at: 5s}\n")
    assert "faults.0.kind" in message and "kill_member" in message and "publish_spike" in message


def test_fault_on_a_member_that_does_not_exist(spec_dir):
    message = errors(spec_dir, SCENARIO + "faults:\n  - {kind: kill_member, member: 3, at: 5s}\n")
    assert "faults.0.member: member 3 does not exist" in message and "0 to 2" in message


def test_fault_needs_a_time_and_a_member(spec_dir):
    message = errors(spec_dir, SCENARIO + "faults:\n  - {kind: stop_member}\n")
    assert "give either at (seconds) or at_step" in message
    message = errors(spec_dir, SCENARIO + "faults:\n  - {kind: kill_member, at_step: 1}\n")
    assert "kill_member needs the member's index" in message
    message = errors(spec_dir, SCENARIO + "faults:\n  - {kind: publish_spike, at_step: 4}\n")
    assert "faults.0.at_step: the plan has 1 steps" in message


def test_sweep_with_no_steps(spec_dir):
    message = errors(spec_dir, SCENARIO.replace("hold: 20s}", "hold: 20s, senders: []}"))
    assert "plan.0.senders" in message and "a sweep needs at least one client count" in message


def test_sweep_beyond_the_workload(spec_dir):
    message = errors(spec_dir, SCENARIO.replace("hold: 20s}", "hold: 20s, senders: [4, 16]}"))
    assert "plan.0.senders: 16 is more than the workload's 8 senders" in message


@pytest.mark.parametrize("rate", ["-100", "'-100:30'"])
def test_negative_rate(spec_dir, rate):
    text = SCENARIO.replace("  - {rate_per_sender: 50, hold: 20s}", f"  - {rate}"
                            if ":" in rate else f"  - {{rate_per_sender: {rate}, hold: 20s}}")
    message = errors(spec_dir, text)
    assert "a rate cannot be negative" in message


def test_consumer_slowdown_needs_manual_ack(spec_dir):
    text = SCENARIO.replace("  receivers: 4", "  receivers: 4\n  ack: auto") + \
        "faults:\n  - {kind: consumer_slowdown, at: 5s}\n"
    assert "needs workload.ack: manual" in errors(spec_dir, text)


def test_perftest_shorthands_ramps_and_sweeps(spec_dir):
    path = spec_dir / "scen.yaml"
    path.write_text(SCENARIO.replace("plan:\n  - {rate_per_sender: 50, hold: 20s}\n", """\
plan:
  - "100:10"
  - {rate_per_sender: 300, hold: 20s, ramp: true}
  - {rate_per_sender: 0, hold: 5s, senders: [1, 2, 4]}
consumer_profile: ["10ms:300s", {delay: 30ms, hold: 1200s, ramp: true}]
"""))
    scenario, _ = load_scenario(path)
    phases = expand(scenario.plan)
    assert [(p.rate_per_sender, p.senders) for p in phases] == [
        (100, None), (300, None), (0, 1), (0, 2), (0, 4)]
    assert phase_at(phases, 20).rate_at(20) == pytest.approx(200)  # half way up the ramp
    assert phase_at(phases, 35).senders == 2 and phase_at(phases, 35).start_s == 35
    delays = delay_phases(scenario.consumer_profile)
    assert value_at(delays, 100) == pytest.approx(0.010)
    assert value_at(delays, 300 + 600) == pytest.approx(0.020)
    assert value_at(delays, 10_000) == pytest.approx(0.030)  # the last delay stays


def test_queue_patterns():
    queue = QueueSpec(name="perf-test-%d", count=100)
    assert queue.names[0] == "perf-test-1" and queue.names[-1] == "perf-test-100"
    assert queue.instance(0, slot=7) == "perf-test-8"
    assert queue.owns("perf-test-100") and not queue.owns("perf-test-101")
    assert not queue.owns("perf-test-x")
    with pytest.raises(ValueError, match="needs a count above 1"):
        QueueSpec(name="q-%d")
    with pytest.raises(ValueError, match="not both"):
        QueueSpec(name="q-%d", count=2, per_member=True)


def test_request_reply_workload_defaults():
    spec = ScenarioSpec.model_validate({
        "name": "rr", "topology": "t.yaml", "plan": ["0:10"],
        "workload": {"pattern": "request-reply", "queue": "q", "senders": 2, "receivers": 1}})
    assert spec.workload.in_flight == 1 and spec.workload.reply_timeout == 10.0
