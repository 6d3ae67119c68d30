"""Adverse conditions: what they leave in the figures (the receive gap and blocked seconds
after a fault, the quorum queues still short of a leader or members, the live view while
blocked), and the faults a topology cannot take refused before anything starts."""

from pathlib import Path

import pytest

from orchestrator.errors import SpecError
from orchestrator.run.liveview import ViewState, plain_line, render
from orchestrator.specs.loader import load_scenario
from results.timeline import fault_recoveries
from topologies.rabbitmq.management import quorum_shortfall

REPO = Path(__file__).resolve().parents[2]


def tick(second, receive, blocked_s=0.0, target=100.0):
    return {"elapsed_s": float(second), "target_rate": target, "send_rate": 100.0,
            "receive_rate": receive, "blocked_s": blocked_s}


def test_a_fault_shows_its_receive_gap_and_blocked_seconds_until_recovery():
    # 3 s blocked by an earlier alarm, then 4 more
    ticks = [tick(s, 100.0, 3.0) for s in range(1, 5)]
    ticks += [tick(s, 0.0, s - 1.0) for s in range(5, 9)]
    ticks += [tick(9, None, 7.0)] + [tick(s, 100.0, 7.0) for s in range(10, 15)]
    events = [{"kind": "step", "t": 0.0}, {"kind": "fault", "t": 4.5, "elapsed_s": 4.5,
                                           "action": "memory_alarm"}]
    [fault] = fault_recoveries(events, ticks)
    assert fault["recovery_s"] == 10.0 - 4.5
    assert fault["receive_gap_s"] == 4.0 and fault["blocked_s"] == 4.0


def test_a_fault_that_takes_effect_late_counts_what_it_held_until_cleared():
    """The alarm is set 4 s after the fault began (a slow broker command): three good ticks
    come first, so the rate "recovers" at once; the blocked seconds are counted to the
    clearing."""
    ticks = [tick(s, 100.0, 0.0) for s in range(1, 9)]
    ticks += [tick(s, 0.0, s - 8.0) for s in range(9, 14)]
    ticks += [tick(s, 100.0, 5.0) for s in range(14, 20)]
    events = [{"kind": "step", "t": 0.0},
              {"kind": "fault", "t": 5.0, "elapsed_s": 5.0, "action": "memory_alarm"},
              {"kind": "fault_cleared", "t": 13.5, "action": "memory_alarm"}]
    [fault] = fault_recoveries(events, ticks)
    assert fault["recovery_s"] == 1.0
    assert fault["blocked_s"] == 5.0 and fault["receive_gap_s"] == 5.0


def test_runs_without_blocked_figures_say_unknown_not_zero():
    ticks = [{k: v for k, v in tick(s, 100.0).items() if k != "blocked_s"} for s in range(5)]
    [fault] = fault_recoveries([{"kind": "fault", "t": 1.0, "elapsed_s": 1.0}], ticks)
    assert fault["blocked_s"] is None and fault["receive_gap_s"] == 0.0


def test_a_quorum_queue_is_short_without_a_leader_or_with_members_offline():
    members = ["a@h", "b@h", "c@h"]
    assert quorum_shortfall({"leader": "a@h", "members": members, "online": members}) == ""
    assert quorum_shortfall({"leader": "", "members": members, "online": members}) == \
        "no leader"
    assert quorum_shortfall({"leader": "a@h", "members": members,
                             "online": ["a@h", "b@h"]}) == "c@h not online"


def test_the_live_view_says_blocked_by_the_broker_while_it_is():
    state = ViewState(target_rate=100.0, send_rate=100.0, receive_rate=0.0)
    assert "BLOCKED" not in plain_line(state)
    state.blocked, state.blocked_s = 4, 6.2
    assert "BLOCKED by the broker: 4 connections (6 s so far)" in plain_line(state)
    assert "BLOCKED by the broker" in str(render(state).renderables[-1])


def test_memory_alarms_and_queue_deletion_need_local_rabbitmq_members(tmp_path):
    (tmp_path / "local.yaml").write_text("name: here\nqueues: [{name: perf}]\n")
    k8s = (REPO / "topologies" / "k8s-rabbitmq-3.yaml").read_text()
    (tmp_path / "k8s.yaml").write_text(k8s)
    scenario = """\
name: adverse
topology: {topology}
workload: {{queue: perf, senders: 1, receivers: 1}}
plan: [{{rate_per_sender: 10, hold: 10s}}]
faults:
  - {{kind: memory_alarm, at: 2s}}
  - {{kind: publish_spike, at: 3s}}
  - {{kind: delete_queues, at: 4s}}
"""
    (tmp_path / "here.yaml").write_text(scenario.format(topology="local.yaml"))
    load_scenario(tmp_path / "here.yaml")
    (tmp_path / "there.yaml").write_text(scenario.format(topology="k8s.yaml"))
    with pytest.raises(SpecError) as raised:
        load_scenario(tmp_path / "there.yaml")
    lines = str(raised.value).splitlines()
    assert len(lines) == 2, lines
    assert "faults.0.kind" in lines[0] and "memory_alarm needs RabbitMQ members surge runs" \
        in lines[0] and "placement kubernetes" in lines[0]
    assert "faults.2.kind" in lines[1] and "delete_queues" in lines[1]


def test_the_progress_line_speaks_the_runs_terms_and_counts_its_clients():
    from results.rundir.steps import ROUND_TRIPS
    state = ViewState(scenario="s", run_id="r", terms=ROUND_TRIPS, target_rate=0.0,
                      send_rate=120.0, receive_rate=119.0, sending=6, consuming=2,
                      phase="running")
    line = plain_line(state)
    assert "target max" in line and "requesters 6  responders 2" in line
    assert "received 119 round trips/s" in line and "msg/s" not in line
    state.phase = "draining"
    assert "senders stopped" in plain_line(state)
