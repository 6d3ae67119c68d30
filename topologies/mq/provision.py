"""Provisioning document 000's uniform cluster on SSH hosts.

``plan()`` lists every file and command per host in order; ``up()`` carries the same plan out
over SSH (skipping queue managers that exist already), so what ``surge plan`` prints is what
runs. Members of the pool beyond ``start`` are created but not started (the document's
pre-created queue managers); a scale-out is one ``strmqm`` in the member's slice, a scale-in
``endmqm -r`` so reconnectable clients move to the other members. Workers connect to the QM
group through the CCDT with reconnect, so the uniform cluster balances them itself
(``balances_clients``: the scaler sends no moves; it records where MQ put them,
``client_placement``). Every remote command, its
output and exit status go to ``record`` (the controller keeps them in the run directory); a
failing command stops provisioning with the host, the command and its stderr.
"""

from __future__ import annotations

import re
import shlex
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import ProvisionError, SurgeError
from orchestrator.specs.mqtopics import mqsc_name
from orchestrator.specs.topology import TopologySpec
from topologies.base import BrokerSample, CpuReading, Member, MemberSample, Provisioner
from topologies.hostcpu import HOST_CPU_COMMAND, LatestReadings, parse_host_cpu
from topologies.mq import metrics, pointtopoint, uniform
from topologies.mq.figures import Figures, PublishedFigures
from topologies.mq.uniform import QueueManager, client_settings

START_TIMEOUT_S = 120.0
QM_MISSING = "AMQ7048E"  # dspmq: the queue manager name is not valid or not known


@dataclass(frozen=True)
class PlanStep:
    """One thing provisioning does on one host: upload a file or run a command."""

    host: str
    what: str  # "upload" or "run"
    text: str  # the remote path (upload) or the command as the documents print it (run)
    content: str = ""  # what is uploaded
    purpose: str = ""
    shell: str = ""  # the command as a shell runs it, where quoting makes it differ from text

    @property
    def command(self) -> str:
        """What is sent to the host's shell."""
        return self.shell or self.text

    def describe(self) -> str:
        """The step as ``surge plan`` prints it."""
        verb = "upload" if self.what == "upload" else "run   "
        why = f"  # {self.purpose}" if self.purpose else ""
        return f"[{self.host}] {verb} {self.text}{why}"


def plan(topology: TopologySpec) -> list[PlanStep]:
    """Everything ``up()`` does, in order: per host, the files, then every queue manager's
    ``crtmqm``, then ``strmqm`` for the first ``start`` ones; queue managers joined by channels
    (a ``link``) then start their senders."""
    qms = uniform.queue_managers(topology)
    steps: list[PlanStep] = []
    for host in topology.ibmmq.hosts:
        here = [qm for qm in qms if qm.host.name == host.name]
        steps += [PlanStep(host.name, "upload", path, content, purpose)
                  for path, (content, purpose) in _files(topology, here).items()]
        for qm in here:
            files = _own(topology, qm)
            steps.append(PlanStep(host.name, "run", uniform.crtmqm(topology, qm, files),
                                  purpose="create",
                                  shell=shlex.join(uniform.crtmqm_args(topology, qm, files))))
    steps += [PlanStep(qm.host.name, "run", uniform.strmqm(topology, qm), purpose="start")
              for qm in qms[:topology.start]]
    if topology.link is not None:
        steps += [PlanStep(qm.host.name, "run", pointtopoint.start_command(topology, qm),
                           purpose="link: start its sender channel") for qm in qms]
    return steps


def _files(topology: TopologySpec, qms: list[QueueManager]) -> dict[str, tuple[str, str]]:
    """The files a host needs for queue managers ``qms``, with what each is for: the uniform
    cluster's shared ones, or each linked queue manager's own."""
    if topology.link is None:
        files = uniform.file_paths(topology)
        return {files["ini"]: (uniform.ini_text(topology),
                               "-ii: qm.ini attributes (AutoCluster, custom stanzas)"),
                files["mqsc"]: (uniform.mqsc_text(topology), "-ic: MQSC run at every start"),
                files["ccdt"]: (uniform.ccdt_text(topology), "JSON CCDT for clients (MQCCDTURL)")}
    out = {uniform.file_paths(topology)["ini"]: (pointtopoint.ini_text(topology),
                                                 "-ii: qm.ini custom stanzas")}
    for qm in qms:
        files = pointtopoint.file_paths(topology, qm)
        out[files["mqsc"]] = (pointtopoint.mqsc_text(topology, qm),
                              f"-ic: {qm.name}'s channels and queues, run at every start")
        out[files["link"]] = (pointtopoint.start_mqsc(topology, qm),
                              f"START CHANNEL of {qm.name}'s sender")
    return out


def _own(topology: TopologySpec, qm: QueueManager) -> dict[str, str] | None:
    """``qm``'s ``-ii``/``-ic`` files where they are its own (linked), else the shared ones."""
    return None if topology.link is None else pointtopoint.file_paths(topology, qm)


class UniformClusterProvisioner(Provisioner):
    """The :class:`topologies.base.Provisioner` of an MQ uniform cluster on SSH hosts."""

    balances_clients = True  # reconnectable clients of the QM group: MQ moves them

    def __init__(self, topology: TopologySpec, session: Callable[[str], object] | None = None,
                 record: Callable[[object], None] | None = None,
                 scrape: Callable[[str, str], metrics.ExporterReading | None] = metrics.scrape,
                 monotonic: Callable[[], float] = time.monotonic):
        self.topology = topology
        self.qms = uniform.queue_managers(topology)
        self.record = record
        self._session_factory = session or self._ssh
        self._sessions: dict[str, object] = {}
        self._scrape, self._monotonic = scrape, monotonic
        interval = uniform.statistics_interval(topology.ibmmq)
        self._figures = {qm.index: PublishedFigures(interval, qm.host.cpus) for qm in self.qms}
        self._running: dict[int, bool] = {}  # what dspmq said last; sample() asks no host
        self._hosts = LatestReadings(self._host_cpu)  # ... but for its CPU, in the background

    # -- the provisioner interface ------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Queue manager ``index`` as a member: its listener and exporter; the endpoint workers
        use is the QM group (``*UC01QM``), whichever member they are placed with."""
        qm = self.qms[index]
        return Member(index, qm.name, qm.address, qm.port, 0, qm.exporter_port,
                      endpoint=uniform.group_endpoint(self.topology.ibmmq))

    def up(self) -> list[Member]:
        """Upload the shared files to every host, create the queue managers that do not exist
        yet, start the first ``start`` ones; returns the pool's status."""
        for step in plan(self.topology):
            if step.what == "upload":
                self._on(step.host).upload(step.content, step.text)
            elif step.purpose == "create":
                qm = next(q for q in self.qms if step.text.endswith(" " + q.name))
                if self._state(qm) is None:
                    self._run(qm.host.name, step.command)
        for qm in self.qms[:self.topology.start]:
            self._start(qm)
        return self.status()

    def status(self) -> list[Member]:
        """Every queue manager with whether ``dspmq`` says it is running."""
        members = []
        for qm in self.qms:
            member = self.member(qm.index)
            self._running[qm.index] = self._state(qm) == "Running"
            members.append(Member(**{**member.__dict__, "running": self._running[qm.index]}))
        return members

    def start_member(self, index: int | None = None) -> Member:
        """Start the next queue manager that is not running (or ``index``)."""
        if index is None:
            idle = [qm for qm in self.qms if self._state(qm) != "Running"]
            if not idle:
                raise ProvisionError(f"all {len(self.qms)} queue managers already run")
            index = idle[0].index
        self._start(self.qms[index])
        return self.status()[index]

    def stop_member(self, index: int, kill: bool = False) -> None:
        """``endmqm -r`` (clients reconnect to the others), or ``endmqm -i`` with ``kill``."""
        qm = self.qms[index]
        self._run(qm.host.name, uniform.endmqm(qm, kill))
        self._running[index] = False

    def sample(self) -> BrokerSample:
        """CPU, connections, messages and depths from each running queue manager's exporter
        (running as dspmq last said, so a tick runs no MQ command), timed as
        :mod:`topologies.mq.figures` says: CPU at the statistics interval it really has; and
        each queue manager host's CPU from its ``/proc/stat`` (document 000's MQHost CPU%), the
        newest reading taken in the background."""
        members, depths = [], {}
        for qm in self.qms:
            running = self._running.get(qm.index, False)
            reading = self._scrape(f"http://{qm.address}:{qm.exporter_port}/metrics",
                                   qm.name) if running else None
            figures = self._figures[qm.index].observe(reading, self._monotonic())
            if reading:
                for queue, depth in reading.depths.items():
                    depths[queue] = depths.get(queue, 0) + depth
            members.append(member_sample(qm.name, running, figures,
                                         self.topology.cpu_per_member))
        return BrokerSample(members, depths, self._hosts.latest())

    def _host_cpu(self) -> dict[str, CpuReading | None]:
        """Each queue manager host's CPU (None: it did not answer)."""
        hosts: dict[str, CpuReading | None] = {}
        for name in dict.fromkeys(qm.host.name for qm in self.qms):
            try:
                hosts[name], _, _ = parse_host_cpu(
                    self._run(name, HOST_CPU_COMMAND).stdout.splitlines())
            except (SurgeError, ValueError, IndexError):  # SSH down, the command failed
                hosts[name] = None
        return hosts

    def client_placement(self) -> dict[str, dict[str, int]]:
        """The workers' connections per APPLTAG on each running queue manager, as
        ``DISPLAY CONN(*) TYPE(CONN) APPLTAG`` lists them (runmqsc's own connection and the
        queue manager's are not the run's and are left out)."""
        mq = self.topology.ibmmq
        tags = (mq.appltag_sender, mq.appltag_receiver)
        placement = {}
        for qm in self.qms:
            if self._running.get(qm.index, False):
                result = self._run(qm.host.name, f"runmqsc -e {qm.name}", check=False,
                                   input_text="DISPLAY CONN(*) TYPE(CONN) APPLTAG\n")
                found = Counter(re.findall(r"APPLTAG\(([^)]*)\)", result.stdout))
                placement[qm.name] = {tag: found[tag] for tag in tags}
        return placement

    def client_settings(self) -> dict[str, Any]:
        """The MQ driver's settings (:func:`~topologies.mq.uniform.client_settings`)."""
        return client_settings(self.topology)

    def settled_queue_depths(self) -> dict[str, int]:
        """Exact depths from ``runmqsc`` on every running queue manager (summed over the
        cluster's instances of each queue)."""
        names = [name for queue in self.topology.queues for name in queue.names]
        return self._read_depths({qm.index: names for qm in self.qms})

    def _read_depths(self, local: dict[int, list[str]]) -> dict[str, int]:
        """``DISPLAY QLOCAL ... CURDEPTH`` of the queues ``local`` names on each running queue
        manager (by index), summed by queue name; every name listed, 0 where none is."""
        depths = {name: 0 for names in local.values() for name in names}
        upper = {name.upper(): name for name in depths}  # MQSC folds unquoted names
        for qm in self.qms:
            if not local.get(qm.index) or self._state(qm) != "Running":
                continue
            script = "\n".join(f"DISPLAY QLOCAL({mqsc_name(name)}) CURDEPTH"
                               for name in local[qm.index]) + "\n"
            result = self._run(qm.host.name, f"runmqsc -e {qm.name}", input_text=script)
            for name, depth in _curdepths(result.stdout).items():
                ours = upper.get(name, name)
                depths[ours] = depths.get(ours, 0) + depth
        return depths

    def down(self) -> list[str]:
        """End (immediately) and delete every queue manager of the pool; close the sessions."""
        said = []
        for qm in self.qms:
            state = self._state(qm)
            if state is None:
                continue
            if state == "Running":
                self._run(qm.host.name, uniform.endmqm(qm, kill=True), check=False)
            self._run(qm.host.name, uniform.dltmqm(qm), check=False)
            said.append(f"deleted {qm.name} on {qm.host.name}")
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        return said or [f"{self.topology.name}: nothing to delete"]

    # -- remote work ----------------------------------------------------------------------------

    def _start(self, qm: QueueManager) -> None:
        if self._state(qm) != "Running":
            self._run(qm.host.name, uniform.strmqm(self.topology, qm))
        deadline = time.monotonic() + START_TIMEOUT_S
        while (state := self._state(qm)) != "Running":
            if time.monotonic() > deadline:
                raise ProvisionError(f"{qm.name} on {qm.host.name} did not reach Running in "
                                     f"{START_TIMEOUT_S:.0f} s (dspmq says {state})")
            time.sleep(1.0)
        self._running[qm.index] = True

    def _state(self, qm: QueueManager) -> str | None:
        """``dspmq``'s STATUS of a queue manager; None if it does not exist."""
        result = self._run(qm.host.name, uniform.dspmq(qm), check=False)
        if QM_MISSING in result.stdout + result.stderr:
            return None
        return uniform.parse_dspmq(result.stdout)

    def _run(self, host: str, command: str, check: bool = True, input_text: str | None = None):
        """Run ``command`` on ``host`` (with ``bin_dir`` first on PATH); a failure becomes a
        ProvisionError naming the host, the command as planned, its status and stderr."""
        from topologies.ssh import RemoteCommandError
        bin_dir = self.topology.ibmmq.bin_dir
        sent = f"PATH={shlex.quote(bin_dir)}:$PATH; export PATH; {command}" if bin_dir \
            else command
        try:
            return self._on(host).run(sent, check=check, input_text=input_text)
        except RemoteCommandError as error:
            result = error.result
            stderr = "\n".join(result.stderr.strip().splitlines()[-5:])
            raise ProvisionError(f"{host} ({result.host}): `{command}` exited with status "
                                 f"{result.status}: {stderr or '(no stderr)'}") from None

    def _on(self, host_name: str):
        if host_name not in self._sessions:
            self._sessions[host_name] = self._session_factory(host_name)
        return self._sessions[host_name]

    def _ssh(self, host_name: str):
        from topologies.ssh import SshSession
        mq = self.topology.ibmmq
        host = next(h for h in mq.hosts if h.name == host_name)
        return SshSession(host.address or host.name, host.ssh or mq.ssh, record=self.record)


def member_sample(name: str, running: bool, figures: Figures, quota: float | None
                  ) -> MemberSample:
    """A queue manager's sample from its exporter's figures of one tick."""
    return MemberSample(name, running, figures.cpu, quota, connections=figures.connections,
                        messages_in=figures.messages_in, messages_out=figures.messages_out,
                        cpu_age_s=figures.cpu_age_s)


def _curdepths(runmqsc_output: str) -> dict[str, int]:
    """``QUEUE(REQUEST) TYPE(QLOCAL) CURDEPTH(12)`` blocks -> {"REQUEST": 12}."""
    depths, queue = {}, None
    for token in runmqsc_output.replace("\n", " ").split():
        if token.startswith("QUEUE(") and token.endswith(")"):
            queue = token[6:-1]
        elif token.startswith("CURDEPTH(") and token.endswith(")") and queue:
            depths[queue] = int(token[9:-1])
    return depths
