"""The capacity search driven by the real controller on fake time, against in-memory agents
whose broker carries a known rate: probes are steps of one run, pauses between them are phase 0,
the search ends by itself near the knee, and run.json records every probe."""

from dataclasses import dataclass

from orchestrator.capacity.plan import SearchSchedule
from orchestrator.capacity.search import SearchSettings
from orchestrator.run.controller import Controller
from orchestrator.specs.capacity import CapacitySpec, SloSpec
from results.rundir.manifest import read_manifest
from tests.fakes import (
    FakeClock,
    MemoryAgent,
    MemoryLauncher,
    ScriptedProvisioner,
    idle_host,
    no_probe,
)
from tests.unit.test_controller import scenario, topology


@dataclass
class SaturatingAgent(MemoryAgent):
    """Receivers that take at most ``carries`` msg/s: a backlog builds above it, and every
    message waits 2 s while one is queued."""

    carries: float = 1000.0
    received: float = 0.0

    def _advance(self) -> None:
        now = self.clock.monotonic()
        if self.last is not None:
            elapsed = now - self.last
            if self.sending:
                self.sent += self.rate * self._publishing() * elapsed
            self.received = min(self.sent, self.received + self.carries * elapsed)
        self.last = now

    def snapshot(self, timeout_s: float = 30.0):
        shot = super().snapshot(timeout_s)
        queued = self.sent - self.received > 1
        self.latency_us = 2_000_000 if queued else 2000
        return type(shot)(**{**shot.__dict__, "received": int(self.received)})


def searched(tmp_path, max_probes: int = 16, agent=None, slo: SloSpec | None = None,
             condition=None):
    """The controller's run of a search on fake time against agents (``agent``, default
    :class:`SaturatingAgent`) that carry 3,000 msg/s, under ``condition`` if given."""
    clock = FakeClock()
    topo = topology(members=1, start=1)
    launcher = MemoryLauncher(2, clock)
    launcher.agents = [(agent or SaturatingAgent)(i, clock, carries=1500.0) for i in range(2)]
    spec = CapacitySpec(hold_min="5s", hold_max="20s", drain="10s")
    slo = slo or SloSpec(p99="100ms", backlog=1000)
    schedule = SearchSchedule(1, SearchSettings(start=500, max_probes=max_probes), spec, slo,
                              senders=2, settle_s=1, condition=condition)
    controller = Controller(scenario([], capacity={}), topo, tmp_path, live=False,
                            provisioner=ScriptedProvisioner(topo, clock), launcher=launcher,
                            clock=clock, host_cpu=idle_host, probes=no_probe,
                            preflights=no_probe, background=False, sd_dir=tmp_path / "sd",
                            schedule=schedule)
    return controller, schedule, controller.run()


def test_the_search_runs_as_steps_and_ends_near_the_knee(tmp_path):
    controller, schedule, result = searched(tmp_path)
    assert result.outcome == "completed"
    found = schedule.found
    assert found.converged and 0.95 * 3000 <= found.rate <= 3000, found
    record = read_manifest(result.run_dir).capacity
    assert record.rate == found.rate and len(record.probes) == found.probes <= 12
    assert [p.held for p in record.probes][:4] == [True, True, True, False]  # 500 .. 4000
    assert record.probes[-1].confirm and record.probes[-1].held
    manifest = read_manifest(result.run_dir)
    assert [p.index for p in manifest.phases] == list(range(1, found.probes + 1))
    assert [s.step for s in result.steps] == list(range(1, found.probes + 1))
    phases = [t["phase"] for t in controller.ticks]
    between = [phases[i] for i in range(1, len(phases) - 1)
               if phases[i - 1] and phases[i + 1] and phases[i - 1] != phases[i + 1]]
    assert between == [] and phases.count(0) > found.probes  # a pause after every probe
    broken = next(p for p in record.probes if not p.held)
    assert broken.rate == 4000 and any("achieved" in r for r in broken.reasons)
    assert schedule.row_found() == result.steps[-1]  # the confirmation


def test_a_search_that_did_not_converge_takes_its_figures_from_the_last_probe_that_held(
        tmp_path):
    _, schedule, result = searched(tmp_path, max_probes=5)  # 500 .. 4,000, then 3,000
    assert not schedule.found.converged and schedule.found.rate == 3000
    row = schedule.row_found()
    assert row.target_rate == 3000 and row.p50_ms is not None
    assert row.step == [o.probe.rate for o in schedule.outcomes].index(3000) + 1
