"""A load agent lost mid-run, on the fake clock: the run goes on with the others, the step
splits where it was lost, and the accounting counts its share up to its last reading and calls
the rest unknown, never lost."""

import dataclasses
import json

import pytest

from drivers import protocol
from drivers.accounting import reconcile
from orchestrator.errors import AgentError
from orchestrator.run.agentloss import LostAgent
from tests.fakes import FakeClock, MemoryAgent, MemoryLauncher
from tests.unit.test_controller import run, scenario, topology


class DyingAgent(MemoryAgent):
    """An in-memory agent whose process is gone from ``dies_at`` on (every call refused)."""

    dies_at: float = float("inf")

    def _gone(self) -> None:
        if self.clock.monotonic() >= self.dies_at:  # as the HTTP client says it
            raise AgentError(f"agent {self.index}: [Errno 111] Connection refused",
                             unreachable=True)

    def snapshot(self, timeout_s: float = 30.0) -> protocol.Snapshot:
        self._gone()
        return super().snapshot(timeout_s)

    def set_rate(self, rate):
        self._gone()
        return super().set_rate(rate)

    def stop_senders(self):
        self._gone()
        return super().stop_senders()

    def accounting(self):
        self._gone()
        return super().accounting()

    def move(self, move):
        self._gone()
        return super().move(move)

    def configure(self, config):
        self._gone()
        return super().configure(config)


def losing(agent: int, after_s: float) -> tuple[FakeClock, MemoryLauncher]:
    """A clock, and two in-memory agents of which ``agent`` dies ``after_s`` into the run."""
    clock = FakeClock()
    launcher = MemoryLauncher(2, clock)
    launcher.agents[agent] = DyingAgent(agent, clock)
    launcher.agents[agent].dies_at = clock.monotonic() + after_s
    return clock, launcher


def test_a_lost_agent_costs_its_share_and_the_run_goes_on(tmp_path):
    clock, launcher = losing(1, 10.5)
    spec = scenario([{"rate_per_sender": 10, "hold": "20s"}])
    result, controller, _, _, manifest = run(spec, topology(), tmp_path, launcher=launcher,
                                             clock=clock)
    assert result.outcome == "completed"
    events = [e for e in map(json.loads, (result.run_dir / "events.jsonl").open())
              if e["kind"] == "agent_lost"]
    assert len(events) == 1 and events[0]["agent"] == 1
    assert 11 <= events[0]["lost_at_s"] <= 14  # three failed reads in a row
    assert events[0]["last_reading_s"] <= 11
    assert [s["label"] for s in manifest["steps"]] == ["1a", "1b"]
    before, after = manifest["steps"]
    assert before["achieved_rate"] == pytest.approx(20, rel=0.05)  # both agents' senders
    assert after["achieved_rate"] == pytest.approx(10, rel=0.05)  # the survivor's
    accounting = manifest["accounting"]
    assert accounting["lost"] is None and accounting["unknown"] == 0
    assert "nothing missing in what the agents reported" in accounting["explain"]
    [record] = manifest["agents_lost"]
    assert record["agent"] == 1 and record["sent"] == record["received"] > 0
    assert accounting["sent"] == int(launcher.agents[0].sent) + record["sent"]


def test_an_agent_a_new_rate_cannot_reach_is_lost_then_and_the_run_goes_on(tmp_path):
    """Gone a moment before a step: the new rate is refused before three reads have failed."""
    clock, launcher = losing(1, 9.8)
    spec = scenario([{"rate_per_sender": 10, "hold": "10s"},
                     {"rate_per_sender": 20, "hold": "10s"}])
    result, controller, _, _, manifest = run(spec, topology(), tmp_path, launcher=launcher,
                                             clock=clock)
    assert result.outcome == "completed"
    events = [e for e in map(json.loads, (result.run_dir / "events.jsonl").open())]
    [lost] = [e for e in events if e["kind"] == "agent_lost"]
    assert lost["agent"] == 1 and 9.8 <= lost["lost_at_s"] < 11
    assert "a command failed: agent 1: [Errno 111] Connection refused" in lost["explain"]
    assert not [e for e in events if e["kind"] == "error"]
    assert launcher.agents[0].rate == 20  # the survivor took the new rate
    assert manifest["steps"][-1]["achieved_rate"] == pytest.approx(20, rel=0.05)
    assert manifest["accounting"]["lost"] is None  # unknown, never guessed
    [record] = manifest["agents_lost"]
    assert record["agent"] == 1 and record["sent"] > 0
    assert record["unconfirmed"] is None  # no confirms asked for: not all of what it sent
    [books] = [e for e in events if e["kind"] == "accounting"]
    assert books["producers_missing"] == {}  # its receivers may have had them: unknown


def test_an_agent_gone_when_its_senders_stop_is_lost_and_the_rest_accounted(tmp_path):
    clock, launcher = losing(0, 11.9)
    result, controller, _, _, manifest = run(
        scenario([{"rate_per_sender": 10, "hold": "12s"}]), topology(), tmp_path,
        launcher=launcher, clock=clock)
    assert result.outcome == "completed"
    [record] = manifest["agents_lost"]
    assert record["agent"] == 0 and record["lost_at_s"] < 12.5  # at the stop, not 3 reads on
    accounting = manifest["accounting"]
    assert accounting["sent"] == int(launcher.agents[1].sent) + record["sent"]


def test_an_agent_gone_before_the_load_fails_the_run_that_would_not_be_the_one_asked(
        tmp_path):
    clock, launcher = losing(1, 0.0)
    with pytest.raises(AgentError, match="Connection refused"):
        run(scenario([{"rate_per_sender": 10, "hold": "5s"}]), topology(), tmp_path,
            launcher=launcher, clock=clock)
    [events] = tmp_path.glob("**/events.jsonl")
    said = [e["kind"] for e in map(json.loads, events.open())]
    assert "agent_lost" not in said and "step" not in said and "agents_down" in said


def test_an_agent_that_answers_with_an_error_fails_the_run(tmp_path):
    """An answer that refuses a command says the agent runs: that is no loss to go on from."""
    clock = FakeClock()
    launcher = MemoryLauncher(2, clock)

    def refuse(rate):
        raise AgentError("agent 1 POST /rate: HTTP 400 the rate is negative")
    launcher.agents[1].set_rate = refuse
    with pytest.raises(AgentError, match="HTTP 400"):
        run(scenario([{"rate_per_sender": 10, "hold": "5s"}]), topology(), tmp_path,
            launcher=launcher, clock=clock)
    [events] = tmp_path.glob("**/events.jsonl")
    said = [e["kind"] for e in map(json.loads, events.open())]
    assert "error" in said and "agent_lost" not in said and "agents_down" in said


def test_a_scale_out_after_an_agent_is_lost_moves_only_the_live_agents_workers(tmp_path):
    clock, launcher = losing(1, 1.5)
    spec = scenario([{"rate_per_sender": 50, "hold": "14s"}], senders=4, receivers=4,
                    scaling={"pool": 2, "scale_out": {
                        "when_any": [{"member_cpu": "80%", "for": "6s"}], "cooldown": "60s"}})
    result, controller, provisioner, _, manifest = run(spec, topology(), tmp_path,
                                                       launcher=launcher, clock=clock,
                                                       cpu_share=0.9)
    events = [e for e in map(json.loads, (result.run_dir / "events.jsonl").open())]
    kinds = [e["kind"] for e in events]
    assert provisioner.started == [1] and "scale_failed" not in kinds, kinds
    assert kinds.index("agent_lost") < kinds.index("scale_decision") < kinds.index("rebalanced")
    moves = [c for c in launcher.agents[0].calls if isinstance(c, protocol.Move)]
    assert sum(len(m.senders) for m in moves) == 1 and sum(len(m.receivers) for m in moves) == 1
    [rebalanced] = [e for e in events if e["kind"] == "rebalanced"]
    assert rebalanced["placement"] == {"r0": 1, "r1": 1, "s0": 1, "s1": 1}


def test_the_scenario_may_end_the_run_when_an_agent_is_lost(tmp_path):
    clock, launcher = losing(1, 5.5)
    spec = scenario([{"rate_per_sender": 10, "hold": "60s"}], exit={"agent_lost": True})
    result, controller, _, _, manifest = run(spec, topology(), tmp_path, launcher=launcher,
                                             clock=clock)
    exits = [e for e in map(json.loads, (result.run_dir / "events.jsonl").open())
             if e["kind"] == "exit"]
    assert exits and exits[0]["reason"] == "an agent was lost"
    assert controller.ticks[-1]["elapsed_s"] < 30


def test_what_a_lost_agent_had_done_counts_and_the_gap_is_unknown():
    lost = LostAgent(1, "h", "refused", 12.0, 11.0,
                     protocol.Snapshot(monotonic_s=1.0, sent=100, confirmed=90, received=40),
                     senders=5, receivers=5)
    assert lost.unconfirmed == 10
    assert dataclasses.replace(lost, confirms=False).unconfirmed is None
    assert "agent 1 on h lost at 12.0 s" in lost.explain()
    assert "what it did after 11.0 s is unknown" in lost.explain()
    done = reconcile(sent=300, confirmed=None, nacked=0, received_unique=280, duplicates=0,
                     still_queued=5, agents_lost=True)
    assert (done.lost, done.unknown, done.balanced) == (None, 15, False)
    assert done.explain().startswith("sent 300, received 280, queued 5")
    assert reconcile(sent=300, confirmed=None, nacked=0, received_unique=295, duplicates=0,
                     still_queued=5).balanced
    later = reconcile(sent=2412, confirmed=None, nacked=0, received_unique=2419, duplicates=0,
                      still_queued=0, agents_lost=True)  # as a real run left it
    assert later.unknown == 7 and "7 more received or queued than the readings show sent " \
        "(sent by a lost agent after its last reading)" in later.explain()


def test_the_report_names_the_lost_agent_at_its_top(tmp_path):
    from results.report import caveats_text
    from results.rundir.manifest import read_manifest
    clock, launcher = losing(0, 6.5)
    result, *_ = run(scenario([{"rate_per_sender": 10, "hold": "12s"}]), topology(), tmp_path,
                     launcher=launcher, clock=clock)
    [line, _] = caveats_text(read_manifest(result.run_dir))
    assert line.startswith("Load agent 0 on memory was lost at ")
