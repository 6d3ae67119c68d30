"""IBM MQ queue managers surge did not start (``placement: existing``).

The queue managers are the ``ibmmq`` section's ``queue_managers`` (name, ``HOST(PORT)``, channel,
``mq_prometheus`` endpoint), or, with only ``ibmmq.ccdt_url``, the CCDT's queue manager group as
one member. Workers connect to ``*<qm_group>`` through the CCDT where there is one (reconnectable,
so a uniform cluster balances them itself: ``balances_clients``), else each to its queue
manager's own channel. User and password (MQCSP) come from ``existing.credentials``, TLS from
``ibmmq.tls``; both reach the agents only in :meth:`client_settings`, the driver's settings in the
Configure message over their authenticated control channel.

``up()`` checks that every listed listener answers and that the credentials can be read;
before any load the controller connects as the clients do and opens each workload queue
(:mod:`drivers.mq.preflight`); surge does not define queues here (the spec refuses
``existing.declare``); the topology's bindings become durable subscriptions that the controller
makes with MQSUB in that check (:meth:`subscriptions`; they stay after the run, as a queue
does). Scale-out and member faults run the user's
``existing.commands``, recorded like surge's own remote commands; ``down()`` stops nothing.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from orchestrator.errors import ProvisionError
from orchestrator.specs.mq import MqQueueManagerSpec, MqSpec
from orchestrator.specs.mqtopics import Subscription, subscriptions
from orchestrator.specs.secrets import SecretError
from orchestrator.specs.topology import TopologySpec
from topologies.base import BrokerSample, Member, Provisioner
from topologies.commands import run_member_command
from topologies.mq import metrics
from topologies.mq.figures import Figures, PublishedFigures
from topologies.mq.provision import member_sample
from topologies.mq.uniform import group_endpoint

CONNECT_TIMEOUT_S = 5.0


def listener_answers(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """``None`` if a TCP listener accepts a connection at ``host``:``port``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as error:
        return error.strerror or str(error)


def _host_port(conname: str | None) -> tuple[str, int]:
    """The first ``host(port)`` of a CONNAME (``("", 0)`` where there is none)."""
    if not conname:
        return "", 0
    first = conname.split(",")[0].strip()
    host, _, port = first.partition("(")
    return host, int(port.rstrip(")"))


class ExistingQueueManagers(Provisioner):
    """The :class:`topologies.base.Provisioner` of queue managers surge did not start."""

    def __init__(self, topology: TopologySpec, record: Callable[[object], None] | None = None,
                 scrape: Callable[[str, str], metrics.ExporterReading | None] = metrics.scrape,
                 monotonic: Callable[[], float] = time.monotonic,
                 reach: Callable[[str, int], str | None] = listener_answers):
        if topology.ibmmq is None or topology.existing is None:
            raise ValueError(f"topology {topology.name} has no ibmmq or existing section")
        self.topology, self.record = topology, record
        self.mq: MqSpec = topology.ibmmq
        self.balances_clients = self.mq.ccdt_url is not None
        self._scrape, self._monotonic, self._reach = scrape, monotonic, reach
        self._serving = set(range(topology.start))
        self._figures = {i: PublishedFigures(self.mq.statistics_interval, qm.cpus)
                         for i, qm in enumerate(self.mq.queue_managers)}

    # -- the pool --------------------------------------------------------------------------------

    def _spec(self, index: int) -> MqQueueManagerSpec | None:
        return self.mq.queue_managers[index] if self.mq.queue_managers else None

    def member(self, index: int) -> Member:
        """Queue manager ``index`` (or the CCDT's group where none is listed) and the endpoint
        its workers use: ``*<qm_group>`` with a CCDT, else ``mq://HOST(PORT)/QMNAME?channel=``."""
        qm = self._spec(index)
        running = index in self._serving
        if qm is None:
            return Member(index, group_endpoint(self.mq), "", 0, 0, 0, running=running,
                          endpoint=group_endpoint(self.mq))
        host, port = _host_port(qm.conname)
        exporter = urlsplit(qm.exporter) if qm.exporter else None
        endpoint = group_endpoint(self.mq) if self.mq.ccdt_url else \
            f"mq://{qm.conname}/{qm.name}?channel={qm.channel or self.mq.channel}"
        return Member(index, qm.name, host, port, 0, (exporter.port or 0) if exporter else 0,
                      running=running, endpoint=endpoint)

    def up(self) -> list[Member]:
        """Check that the listener of every queue manager in service answers and that the
        credentials can be read; start nothing."""
        for index in sorted(self._serving):
            qm = self._spec(index)
            if qm is None or not qm.conname:
                continue  # the CCDT says where it is; the MQ client finds out
            host, port = _host_port(qm.conname)
            why = self._reach(host, port)
            if why is not None:
                raise ProvisionError(f"ibmmq.queue_managers[{index}] {qm.name}: nothing "
                                     f"answers at {qm.conname} ({why})")
        self.client_settings()  # a password that cannot be read fails here, before any load
        return self.status()

    def status(self) -> list[Member]:
        """Every queue manager of the pool; in service as far as surge has put it there."""
        return [self.member(i) for i in range(self.topology.members)]

    def start_member(self, index: int | None = None) -> Member:
        """Bring a queue manager into service with ``existing.commands.start_member``."""
        if index is None:
            idle = [i for i in range(self.topology.members) if i not in self._serving]
            if not idle:
                raise ProvisionError(f"all {self.topology.members} queue managers serve")
            index = idle[0]
        self._command("start_member", index, len(self._serving | {index}))
        self._serving.add(index)
        return self.member(index)

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Take a queue manager out of service (``stop_member``) or kill it (``kill_member``)."""
        self._command("kill_member" if kill else "stop_member", index,
                      len(self._serving - {index}))
        self._serving.discard(index)

    def _command(self, which: str, index: int, count: int) -> None:
        commands = self.topology.existing.commands
        template = getattr(commands, which)
        if template is None:
            raise ProvisionError(f"existing.commands.{which} is not given: surge does not act "
                                 f"on queue managers it did not start without it")
        run_member_command(template, f"existing.commands.{which}", commands.timeout,
                           self.record, index=index, name=self.member(index).name, count=count)

    # -- figures -----------------------------------------------------------------------------

    def _read(self) -> dict[int, tuple[Figures, metrics.ExporterReading | None]]:
        read = {}
        for index in range(self.topology.members):
            qm = self._spec(index)
            if qm is None or qm.exporter is None or index not in self._serving:
                read[index] = (Figures(), None)
                continue
            reading = self._scrape(qm.exporter, qm.name)
            read[index] = (self._figures[index].observe(reading, self._monotonic()), reading)
        return read

    def sample(self) -> BrokerSample:
        """Each queue manager's figures from its exporter (unknown without one, never 0) and
        the queue depths where every queue manager in service has an exporter that answered."""
        read = self._read()
        members = [member_sample(self.member(i).name, i in self._serving, figures,
                                 self.topology.cpu_per_member)
                   for i, (figures, _) in read.items()]
        return BrokerSample(members, self._depths(read))

    def _depths(self, read: dict[int, tuple[Figures, Any]]) -> dict[str, int] | None:
        readings = [read[i][1] for i in sorted(self._serving)]
        if not readings or any(r is None for r in readings):
            return None
        depths: dict[str, int] = {}
        for reading in readings:
            for queue, depth in reading.depths.items():
                depths[queue] = depths.get(queue, 0) + depth
        return depths

    def settled_queue_depths(self) -> dict[str, int] | None:
        """The workload queues' depths summed over the exporters' status polls, where every
        queue manager in service has one; ``None`` (unknown) otherwise."""
        depths = self._depths(self._read())
        if depths is None:
            return None
        names = [name for queue in self.topology.queues for name in queue.names]
        return {name: depths.get(name, depths.get(name.upper(), 0)) for name in names}

    # -- clients -----------------------------------------------------------------------------

    def subscriptions(self) -> list[Subscription]:
        """The bindings' durable subscriptions (:mod:`orchestrator.specs.mqtopics`), made or
        resumed before any load on every queue manager in service."""
        return subscriptions(self.topology)

    def client_settings(self) -> dict[str, Any]:
        """The MQ driver's settings (:class:`drivers.mq.settings.MqSettings` fields), with the
        user and password of ``existing.credentials`` and the TLS of ``ibmmq.tls``, read now;
        :class:`SecretError` naming the field when a secret cannot be read."""
        mq, credentials = self.mq, self.topology.existing.credentials
        settings: dict[str, Any] = {
            "queue_manager": group_endpoint(mq) if mq.ccdt_url else "", "channel": mq.channel,
            "ccdt_url": mq.ccdt_url or "", "reconnect": mq.reconnect,
            "appltag_sender": mq.appltag_sender, "appltag_receiver": mq.appltag_receiver}
        if credentials is not None:
            settings["user"] = credentials.user
            settings["password"] = credentials.password("existing.credentials")
        if mq.tls is not None:
            settings.update(tls_cipher_spec=mq.tls.cipher_spec,
                            tls_key_repository=mq.tls.key_repository,
                            tls_certificate_label=mq.tls.certificate_label or "")
            name = mq.tls.key_repository_password_env
            if name is not None:
                if not os.environ.get(name):
                    raise SecretError(f"ibmmq.tls.key_repository_password_env: environment "
                                      f"variable {name} is not set or empty")
                settings["tls_key_repository_password"] = os.environ[name]
        return settings

    def down(self) -> list[str]:
        """Stop nothing: surge did not start these queue managers."""
        return [f"{self.topology.name}: {self.topology.members} queue manager(s) left as they "
                f"were (surge did not start them)"]
