"""``surge plan``: everything a run of a scenario would do, in order, without touching anything.

The broker side comes from the same functions the provisioners execute (the MQ uniform
cluster's per-host files and commands, the Native HA manifests, the RabbitMQ members), the load
side from the same plan expansion the controller ticks through.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from orchestrator.specs import plan as plans
from orchestrator.specs.loader import load_scenario
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import LinkSpec, QueueSpec, TopologySpec
from results.rundir.steps import fixed_width
from topologies.base import Provisioner


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (mqsc and ini files) as literal blocks, as people write them."""


_BlockDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def scenario_plan_text(path: Path, overrides: list[str], warn: Callable[[str], None]) -> str:
    """``surge plan``: the scenario file's (with ``--set`` ``overrides``) :func:`plan_text`;
    its warnings go to ``warn``."""
    return plan_text(*load_scenario(path, overrides, warn))


def plan_text(scenario: ScenarioSpec, topology: TopologySpec) -> str:
    """The whole plan as text: the topology's steps, then the load."""
    return "\n\n".join([_topology_text(topology), _load_text(scenario, topology)]) + "\n"


def _topology_text(topology: TopologySpec) -> str:
    head = (f"# Topology {topology.name}: {topology.broker} ({topology.placement}), "
            f"{topology.members} members, {topology.start} started"
            + (f", {topology.cpu_per_member:g} cores each" if topology.cpu_per_member else ""))
    if topology.broker == "ibmmq" and topology.placement == "ssh":
        return head + "\n\n" + _uniform_cluster_text(topology)
    if topology.broker == "rabbitmq" and topology.placement == "existing":
        return head + "\n\n" + _existing_rabbitmq_text(topology)
    if topology.placement == "kubernetes":
        if topology.broker == "ibmmq":
            from topologies.mq.manifests import render
            objects = render(topology)
        else:
            from topologies.rabbitmq.manifests import render
            objects = [render(topology)]
        rendered = yaml.dump_all(objects, Dumper=_BlockDumper, sort_keys=False)
        return head + "\n\n## Applied with the kubernetes client, in order\n\n" + rendered
    return head + "\n\n" + _rabbitmq_members_text(topology)


def _uniform_cluster_text(topology: TopologySpec) -> str:
    from topologies.mq import pointtopoint, provision, uniform
    steps = provision.plan(topology)
    files = {step.text: step.content for step in steps if step.what == "upload"}
    lines = ["## Commands, host by host, in order (over SSH)", ""]
    lines += [step.describe() for step in steps]
    if topology.link is None:
        lines += ["", "## Later, on demand",
                  *[f"[{qm.host.name}] run    {uniform.strmqm(topology, qm)}  # scale-out"
                    for qm in uniform.queue_managers(topology)[topology.start:]],
                  "[any]     run    endmqm -r <QM>  # scale-in: clients move to the other "
                  "members"]
    else:
        lines += ["", "## Link (sender and receiver channels, started after strmqm)", "",
                  *pointtopoint.route_lines(topology)]
    for path, content in files.items():
        lines += ["", f"## {path}", "", content.rstrip()]
    return "\n".join(lines)


def _existing_rabbitmq_text(topology: TopologySpec) -> str:
    """What surge will do with a cluster it did not start: connect, check, observe, and act on
    members only through the commands given. Reads no secret."""
    from topologies.factory import provisioner_for
    existing = topology.existing
    assert existing is not None
    provisioner = provisioner_for(topology)
    rows = [["member", "clients connect to", "prometheus", "management"]]
    rows += [[provisioner.member(i).name, m.uri, m.prometheus or "-", m.management or "-"]
             for i, m in enumerate(existing.members)]
    user = existing.credentials.user if existing.credentials else "-"
    queues = [f"{'declare' if existing.declare else 'check it exists:'} {q.type} queue {name}"
              if not q.per_receiver else f"each receiver declares its own queue ({q.name})"
              for q in topology.queues for name in _shown_names(q)]
    commands = [f"{name}: {getattr(existing.commands, name)}"
                for name in ("start_member", "stop_member", "kill_member")
                if getattr(existing.commands, name)]
    return "\n".join([
        "## Members (a cluster surge did not start: nothing is started or stopped)", "",
        fixed_width(rows), "", f"as user {user} on virtual host {existing.vhost}", "",
        "## Queues, before any load" + (" (management API)" if existing.declare else ""), "",
        *queues, "", "## Member commands (scale-out and faults)", "",
        *(commands or ["none: scale-out and member faults are refused"]), "",
        "## Not measured", "",
        *[f"{figure}: {why}" for figure, why in provisioner.unmeasured().items()]])


def _shown_names(queue: QueueSpec) -> list[str]:
    """The queue's names as the plan prints them (an instance per member as one line)."""
    return [f"{queue.name}.<member>"] if queue.per_member else queue.names


def _rabbitmq_members_text(topology: TopologySpec) -> str:
    from topologies.factory import provisioner_for
    provisioner = provisioner_for(topology)
    rows = [["member", "host", "amqp", "management", "prometheus", "cpu quota", "at start"]]
    for index in range(topology.members):
        member = provisioner.member(index)
        rows.append([member.name, member.host, str(member.port),
                     str(member.management_port),
                     str(member.prometheus_port),
                     f"{topology.cpu_per_member:g} cores" if topology.cpu_per_member
                     else "unlimited",
                     "serves" if index < topology.start else
                     "standby" if topology.warm_pool else "not booted"])
    queues = [f"declare {q.type} queue {name}" + (f" {dict(q.arguments)}" if q.arguments else "")
              if not q.per_receiver else f"each receiver declares its own queue ({q.name})"
              for q in topology.queues for name in _shown_names(q)]
    where = "over SSH" if topology.placement == "ssh" else "on loopback"
    link = [] if topology.link is None else _shovels_text(topology.link, provisioner)
    return "\n".join([f"## Members (rabbitmq-server {where}, one cgroup each)", "",
                      fixed_width(rows), "", "## Queues (management API)", "", *queues, *link])


def _shovels_text(link: LinkSpec, provisioner: Provisioner) -> list[str]:
    """Where linked clusters' members are and each shovel in words."""
    own = link.first_of(2)
    where = f"in the link's own member {own}" if link.own_members else "in side b's first member"
    return ["", f"## Link ({link.kind}s run {where}, {link.ack_mode}; side a: members 0 to "
                f"{link.first_of(1) - 1}, side b: {link.first_of(1)} to {own - 1}; each side "
                f"declares the queues)", "", *provisioner.route_lines()]


def _load_text(scenario: ScenarioSpec, topology: TopologySpec) -> str:
    workload = scenario.workload
    phases = plans.expand(scenario.plan)
    persistence = "persistent" if workload.message.persistent else "non-persistent"
    lines = [f"# Scenario {scenario.name}: {workload.pattern}, {workload.senders} senders, "
             f"{workload.receivers} receivers on {workload.queue}, "
             f"{workload.message.summary} {persistence}",
             "", "## Load plan", ""]
    started = any(phase.receivers is not None for phase in phases)
    rows = [["step", "from s", "to s", "msg/s per sender", "senders",
             *(["receivers started"] if started else []), "target msg/s"]]
    receivers = workload.receivers
    for phase in phases:
        senders = phase.senders or workload.senders
        receivers = phase.receivers or receivers
        rate = (f"{phase.from_rate:g} -> {phase.rate_per_sender:g}" if phase.from_rate is not None
                else f"{phase.rate_per_sender:g}" if phase.rate_per_sender else "max")
        target = phase.rate_per_sender * senders
        rows.append([str(phase.index), f"{phase.start_s:g}", f"{phase.end_s:g}", rate,
                     str(senders), *([str(receivers)] if started else []),
                     f"{target:,.0f}" if target else "max"])
    lines.append(fixed_width(rows))
    if scenario.consumer_profile:
        lines += ["", "## Consumer processing time", ""]
        lines += [f"{p.start_s:g}-{p.end_s:g} s: "
                  + (f"{p.from_rate * 1000:g} -> " if p.from_rate is not None else "")
                  + f"{p.rate_per_sender * 1000:g} ms" for p in plans.delay_phases(
                      scenario.consumer_profile)]
    if scenario.faults:
        lines += ["", "## Faults", ""]
        for fault in scenario.faults:
            at = f"{fault.at:g} s" if fault.at is not None else f"start of step {fault.at_step}"
            lines.append(f"at {at}: {fault.kind}" + (f" member {fault.member}" if fault.member
                                                     is not None else ""))
    if scenario.scaling:
        lines += ["", "## Scaling", "", yaml.safe_dump(scenario.scaling.model_dump(
            mode="json", by_alias=True, exclude_none=True), sort_keys=False).rstrip()]
    lines += ["", f"Planned load time {plans.duration(phases):g} s, then drain up to "
                  f"{scenario.measure.drain:g} s and the accounting."]
    return "\n".join(lines)
