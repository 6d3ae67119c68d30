"""Two IBM MQ queue managers over SSH joined by sender and receiver channels (a topology's
``link`` of kind ``channel``; document 004's messages moved between queue managers).

Provisioned as the uniform cluster is (:mod:`topologies.mq.provision`: the same plan, run over
SSH) but with each queue manager's own ``-ic`` file (:mod:`topologies.mq.pointtopoint`), no
cluster and no CCDT, and, after each ``strmqm``, the ``START CHANNEL`` of its sender. Workers
connect to their side's queue manager by name; nothing moves them. Requests waiting on side
a's transmission queue are still the workload's (:attr:`transit_queues`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.base import Member
from topologies.mq import pointtopoint
from topologies.mq.provision import UniformClusterProvisioner
from topologies.mq.uniform import QueueManager

LINK_TIMEOUT_S = 60.0  # until each sender says it runs (or stopped)
POLL_S = 0.5


class LinkedQueueManagers(UniformClusterProvisioner):
    """The :class:`topologies.base.Provisioner` of two queue managers joined by channels:
    member 0 is side a's, member 1 side b's."""

    balances_clients = False  # each worker stays with its side's queue manager

    def __init__(self, topology: TopologySpec, **kwargs: Any):
        super().__init__(topology, **kwargs)
        pointtopoint.link_of(topology)
        side_b = pointtopoint.pair(topology)[1]
        self.transit_queues = frozenset({side_b.name})  # side a's transmission queue: requests

    # -- the pool ---------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Queue manager ``index``, reached by its own listener (not the group)."""
        qm = self.qms[index]
        return dataclasses.replace(super().member(index),
                                   endpoint=pointtopoint.endpoint(self.topology, qm))

    def up(self) -> list[Member]:
        """Provision and start both queue managers and their senders; wait until both run."""
        members = super().up()
        self._await_link(up=True)
        return members

    def start_member(self, index: int | None = None) -> Member:
        """Start queue manager ``index`` again (after a fault) and its sender; a linked
        topology does not grow."""
        if index is None:
            raise ProvisionError(f"{self.topology.name}: a linked topology starts both queue "
                                 "managers at once and does not scale")
        member = super().start_member(index)
        self._await_link(up=True)
        return member

    def sides(self) -> list[list[Member]]:
        """Side a's queue manager, then side b's, running as ``dspmq`` last said."""
        return [[dataclasses.replace(self.member(qm.index),
                                     running=self._running.get(qm.index, False))]
                for qm in self.qms]

    def client_settings(self) -> dict[str, Any]:
        """The MQ driver's settings (:func:`~topologies.mq.pointtopoint.client_settings`)."""
        return pointtopoint.client_settings(self.topology)

    def settled_queue_depths(self) -> dict[str, int]:
        """Exact depths of each queue manager's own local queues: side a's reply queues and
        its transmission queue (requests not yet sent), side b's request queues and its
        transmission queue (replies not yet sent)."""
        qma, qmb = pointtopoint.pair(self.topology)
        return self._read_depths({
            qma.index: [*sorted(pointtopoint.reply_names(self.topology)), qmb.name],
            qmb.index: [*pointtopoint.request_names(self.topology), qma.name]})

    def unmeasured(self) -> dict[str, str]:
        """The link has no CPU figure of its own."""
        return {"link CPU": "the channels' agents run inside each queue manager (amqrmppa), "
                            "in its CPU figure; none of their own"}

    # -- the link ---------------------------------------------------------------------------

    def link_state(self) -> dict[str, object]:
        """Each side's queue manager and each sender channel's status, as its own queue
        manager says (``inactive``: no status)."""
        return {"kind": "channel", "sides": [[qm.name] for qm in self.qms], "runs_in": "",
                "channels": self._senders()}

    def set_link(self, up: bool) -> None:
        """Start both senders and wait until they run (``up``), or stop them (each after its
        current batch: what is put meanwhile waits on its transmission queue)."""
        for qm in self.qms:
            if self._running.get(qm.index, False):
                self._sender(qm, up)
        self._await_link(up)

    def route_lines(self) -> list[str]:
        """Each channel in words, for ``surge plan``."""
        return pointtopoint.route_lines(self.topology)

    def _start(self, qm: QueueManager) -> None:
        super()._start(qm)
        self._sender(qm, up=True)

    def _sender(self, qm: QueueManager, up: bool) -> None:
        """START CHANNEL of ``qm``'s sender (its uploaded file, as planned), or STOP."""
        if up:
            self._run(qm.host.name, pointtopoint.start_command(self.topology, qm))
        else:
            self._run(qm.host.name, f"runmqsc -e {qm.name}",
                      input_text=pointtopoint.stop_mqsc(self.topology, qm))

    def _senders(self) -> dict[str, str]:
        """Each running queue manager's sender channel and its status."""
        states = {}
        for qm in self.qms:
            name = pointtopoint.sender(qm, pointtopoint.other(self.topology, qm))
            if not self._running.get(qm.index, False):
                states[name] = "inactive"
                continue
            result = self._run(qm.host.name, f"runmqsc -e {qm.name}", check=False,
                               input_text=pointtopoint.CHSTATUS)
            states[name] = pointtopoint.parse_chstatus(result.stdout).get(name, "inactive")
        return states

    def _await_link(self, up: bool) -> None:
        """Until every sender runs (``up``) or none does."""
        deadline = time.monotonic() + LINK_TIMEOUT_S
        while True:
            states = self._senders()
            waiting = {name: state for name, state in states.items()
                       if (state == "running") != up}
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise ProvisionError(
                    f"{self.topology.name}: channels not {'running' if up else 'stopped'} "
                    f"after {LINK_TIMEOUT_S:.0f} s: " + ", ".join(
                        f"{name} {state}" for name, state in sorted(waiting.items())),
                    temporary=True)
            time.sleep(POLL_S)
