"""Adverse conditions done for real on a RabbitMQ cluster surge runs: a memory alarm that
blocks publishers, queues deleted under their consumers and declared again, and the wait for
every quorum queue to have its leader and all its members back (between the members of a
rolling restart).

A mixin for provisioners that run their members' ``rabbitmqctl`` (``_ctl``) and reach their
management API (``management``); the fault schedule uses what a provisioner offers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.base import Member
from topologies.rabbitmq import queues
from topologies.rabbitmq.management import Management

#: The relative high watermark under which any running VM is over it: the alarm goes off.
ALARM_WATERMARK = "0.0001"
#: RabbitMQ's default (surge's members do not set one), set again when the alarm is over.
DEFAULT_WATERMARK = "0.4"
QUORUM_POLL_S = 0.5


class AdverseControls:
    """Memory alarms, queue deletion and the quorum wait, for a provisioner of RabbitMQ."""

    topology: TopologySpec
    management: Callable[..., Management]
    _declare_queues: Callable[[list[int]], None]
    member: Callable[[int], Member]
    running: Callable[[], list[Member]]
    _ctl: Callable[..., str]

    def memory_alarm(self, index: int, on: bool) -> None:
        """Set member ``index``'s memory high watermark so low that its alarm goes off (the
        broker blocks every publishing connection of the cluster), or back to the default."""
        self._ctl(self.member(index).name, "set_vm_memory_high_watermark",
                  ALARM_WATERMARK if on else DEFAULT_WATERMARK)

    def delete_queues(self) -> list[str]:
        """Delete the topology's queues (their consumers are cancelled by the broker, their
        messages go with them); returns their names."""
        api = self.management()
        names = [name for _, name, _ in queues.placements(
            self.topology.queues, [m.index for m in self.running()])]
        for name in names:
            api.delete_queue(name)
        return names

    def purge_queues(self, members: list[Member], names: list[str]) -> dict[str, int]:
        """Remove every message in the queues ``names`` through the management API of the
        running ``members``; the messages removed per queue."""
        api = self.management(members)
        return {name: api.purge(name) for name in names}

    def declare_queues(self) -> None:
        """Declare the topology's queues again (idempotent), led as at ``up``."""
        self._declare_queues([m.index for m in self.running()])

    def await_quorum(self, timeout_s: float = 120.0, stop=None) -> float:
        """Wait until every quorum queue has a leader and all its members online; returns the
        seconds waited. ``ProvisionError`` (temporary) names the queues still short after
        ``timeout_s``."""
        started = time.monotonic()
        short: dict[str, str] = {"(not asked yet)": ""}
        while time.monotonic() - started < timeout_s and not (stop and stop.is_set()):
            try:
                short = self.management().quorum_queues_short()
            except ProvisionError as error:
                short = {"(management API)": str(error)}
            if not short:
                return time.monotonic() - started
            time.sleep(QUORUM_POLL_S)
        listed = "; ".join(f"{name}: {why}" for name, why in sorted(short.items())[:5])
        raise ProvisionError(f"quorum queues still short after {timeout_s:.0f} s: {listed}",
                             temporary=True)
