"""What the scaler sees of each second of the run."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

from orchestrator.clock import Clock
from orchestrator.run.listeners import TickRecord
from orchestrator.run.sampling import Tick
from orchestrator.scaling.policy import Observation
from orchestrator.scaling.scaler import Scaler
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from topologies.base import BrokerSample, Provisioner


def scaler_for(scenario: ScenarioSpec, topology: TopologySpec, provisioner: Provisioner,
               queue: QueueSpec, ready: Callable[..., Any], event: Callable[..., None],
               clock: Clock, background: bool, lost: Container[int]) -> Scaler | None:
    """The run's scaler over the topology's pool (``None`` where the scenario does not scale);
    ``ready`` says when a started member serves the workload's queues, ``lost`` which agents
    the run lost (their workers are moved no more)."""
    scaling = scenario.scaling
    return Scaler(scaling, provisioner, queue,
                  pool=min(scaling.pool or topology.members, topology.members),
                  minimum=topology.start, event=event, ready=ready, clock=clock,
                  background=background, lost=lost) if scaling else None


def observation(latest: BrokerSample | None, row: dict[str, Any], tick: Tick, elapsed: float,
                target: float, depth: int | None) -> Observation:
    """What the scaling policy sees of one tick: each running member's CPU (``latest``'s
    running members) as a share of its quota, ``None`` where it is unknown this second (it
    stays in, unknown)."""
    running = [m for m in (latest.members if latest else []) if m.running]
    cpu = [tick.member_cpu_percent.get(m.name) for m in running]
    return Observation(
        elapsed_s=elapsed, target_rate=target,
        achieved_rate=min(row["send_rate"], row["receive_rate"]),
        member_cpu=tuple(None if c is None else c / 100 / (m.cpu_quota_cores or 1.0)
                         for m, c in zip(running, cpu, strict=True)),
        members=tuple(m.name for m in running),
        queue_depth=depth, p99_s=None if row["latency_p99_ms"] is None
        else row["latency_p99_ms"] / 1000)


class ScalerFeed:
    """Hands the scaler each second of the load that has both rates (a listener; the drain
    and seconds with a rate unknown are not observed)."""

    def __init__(self, scaler: Scaler):
        self.scaler = scaler

    def on_tick(self, record: TickRecord) -> None:
        """Observe the second, with the members running in the latest sample."""
        row = record.row
        if record.phase is None or None in (row["send_rate"], row["receive_rate"]):
            return
        self.scaler.observe(observation(record.latest, row, record.tick, record.elapsed_s,
                                        row["target_rate"], row["queue_depth"]),
                            running=record.running)
