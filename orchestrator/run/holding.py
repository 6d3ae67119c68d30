"""The members a run holds: whose they are before it starts, what a run that died left in
their queues, what of them cannot be measured, whether their queues were checked, and what
becomes of them at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.errors import SurgeError
from orchestrator.run.depth import QueueDepth
from orchestrator.specs.topology import QueueSpec
from orchestrator.specs.workload import WorkloadSpec
from results.rundir.manifest import BrokerRecord, Clocks, LinkRecord, Reuse, RunManifest
from topologies import lease
from topologies.base import Member, Provisioner
from topologies.rabbitmq.queues import placements

Event = Callable[..., None]


def members_running(provisioner: Provisioner, topology: str, reuse: bool) -> Reuse | None:
    """The members already running, and who started them (``None``: none runs). They are
    used where ``surge up``, this process or a run that kept them started them; members that a
    run which died started are refused unless ``reuse``."""
    running = [m.name for m in provisioner.status() if m.running]
    if not running:
        return None
    owner = lease.members_owner(topology)
    foreign = lease.foreign_owner(owner)
    if foreign and not reuse:
        raise lease.TopologyBusy(
            f"{len(running)} members of {topology} still run that "
            f"{lease.describe(owner)} started and did not end: stop them with surge down, "
            f"or run on them with --reuse (they are stopped at the end unless --keep)")
    why = (f"started by {lease.describe(owner)}, which died; reused as asked (--reuse), "
           f"the messages it left in the workload's queues removed first"
           if foreign else f"started by {lease.describe(owner)}"
           if owner else "already running, not started by a surge run")
    return Reuse(members=running, started_by=owner or {}, why=why)


def say_found(previous: dict | None, settled: str | None, stale: list[str], reused: Reuse | None,
              manifest: RunManifest, event: Event) -> RunManifest:
    """Say what the run found as it took the topology: a ``previous`` holder that died (how it
    was ``settled``), the ``stale`` discovery files removed, the members it runs on that were
    already running (``reused``, also in run.json)."""
    if settled:
        event("previous_holder_died", holder=lease.describe(previous), explain=settled)
    if stale:
        event("stale_discovery_removed", runs=stale)
    if reused is None:
        return manifest
    event("members_reused", members=reused.members,
          explain=f"{len(reused.members)} members already running: {reused.why}")
    return manifest.replace(reused=reused)


def purge_left(provisioner: Provisioner, queue: QueueSpec, running: list[Member],
               event: Event) -> None:
    """Remove what a run that died left in the workload's queues (its messages would count
    as this run's); said as an event, or that it could not be done."""
    names = [name for _, name, _ in placements([queue], [m.index for m in running])]
    try:
        purged = provisioner.purge_queues(running, names)
    except SurgeError as error:
        purged, why = None, str(error)
    else:
        why = "this broker offers no way to purge queues"
    event("queues_purged", purged=purged, explain=f"removed {sum(purged.values())} "
          f"messages left in {', '.join(names)}" if purged is not None else
          f"messages left in {', '.join(names)} were NOT removed ({why}): they may "
          f"count as this run's")


def release_members(provisioner: Provisioner, topology: str, keep: bool, event: Event) -> None:
    """Stop the members this run started (or took over), or hand them over as kept."""
    if keep:
        owner = lease.members_owner(topology) or {}
        lease.record_members(topology, {**owner, "kept": True})
        return
    event("teardown", said=provisioner.down())
    lease.record_members(topology, None)


def note_unmeasured(provisioner: Provisioner, manifest: RunManifest, event: Event
                    ) -> RunManifest:
    """Say, in the events and run.json, which figures this placement cannot know and why
    (they stay unknown in the rows, never zero)."""
    unmeasured = provisioner.unmeasured()
    if not unmeasured:
        return manifest
    event("unmeasured", figures=unmeasured)
    return manifest.replace(unmeasured=unmeasured)


def note_link(provisioner: Provisioner, manifest: RunManifest, event: Event) -> RunManifest:
    """Linked clusters: which members are each side's, where the link runs and how its
    shovels stand, in the events and run.json."""
    state = provisioner.link_state()
    if state is None:
        return manifest
    link = LinkRecord.model_validate(state)
    states = link.states()
    running = sum(s == "running" for s in states.values())
    event("link", link=link.model_dump(),
          explain=f"{running} of {len(states)} {link.kind}s run, {link.where()}")
    return manifest.replace(link=link)


def check_queues(depth: QueueDepth, running: list[Member], workload: WorkloadSpec,
                 manifest: RunManifest, event: Event) -> RunManifest:
    """Before any load, check the clients' connections and the workload's queues; where
    that cannot be done from here, say so (a shown event) rather than pass in silence. What
    the broker said it is goes into run.json and an event (``broker``), which says it
    loudly for an emulator."""
    why = depth.check(running, workload)
    if why:
        event("queues_unchecked", reason=why,
              explain=f"the workload's queues and the clients' connections were NOT "
                      f"checked before the load: {why}")
    if depth.identity is None:
        return manifest
    broker = BrokerRecord.model_validate(depth.identity)
    event("broker", **broker.model_dump(), label=broker.line().removeprefix("Broker: "),
          explain=broker.line())
    return manifest.replace(broker=broker)


def record_clocks(clocks: dict[str, Any], manifest: RunManifest, event: Event) -> RunManifest:
    """How far the hosts' clocks agree, in run.json and as an event."""
    bound, reliable = clocks["latency_error_bound_ms"], clocks["latency_reliable"]
    event("clocks", hosts=clocks["hosts"], latency_error_bound_ms=bound,
          latency_reliable=reliable,
          explain=f"host clocks agree within {bound:.1f} ms" if reliable else
          f"host clocks may differ by {bound:.1f} ms: latency across hosts is unreliable")
    return manifest.replace(clocks=Clocks.model_validate(clocks))
