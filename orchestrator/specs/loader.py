"""Load spec files from YAML into typed models, with errors that name file, field and line.

``--set a.b=value`` overrides are applied to the parsed document before validation, so they
are checked exactly like the file. Unknown keys get a did-you-mean from the model's fields.
Files and ``--set`` values are read by :mod:`orchestrator.specs.yamlsafe` (size, encoding, repeated
keys, alias and depth limits); every problem between fields is reported at its own line.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import Problem, SpecError, one_line
from orchestrator.specs import plan as plans
from orchestrator.specs import yamlsafe
from orchestrator.specs.base import COLLECT, Loc, Spec, cross_problems
from orchestrator.specs.caveats import scenario_caveats
from orchestrator.specs.footprint import memory_problems
from orchestrator.specs.message import MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES
from orchestrator.specs.routing import mq_key_fits, mq_key_problem
from orchestrator.specs.scenario import LOCAL_RABBITMQ_FAULTS, ScenarioSpec
from orchestrator.specs.secrets import INLINE_SECRET
from orchestrator.specs.topology import QueueSpec, TopologySpec
from orchestrator.specs.workload import WorkloadSpec
from orchestrator.specs.yamlsafe import PlusSigned

__all__ = ["PlusSigned", "Problem", "load_model", "load_scenario", "load_topology"]


def load_topology(path: str | Path, overrides: list[str] | None = None) -> TopologySpec:
    """Read and validate a topology file (plus ``key=value`` overrides)."""
    return _load(Path(path), TopologySpec, overrides or [])[0]


def load_scenario(path: str | Path, overrides: list[str] | None = None,
                  warn: Callable[[str], None] | None = None, need_plan: bool = False
                  ) -> tuple[ScenarioSpec, TopologySpec]:
    """Read a scenario and the topology it names; ``topology.*`` overrides go to the topology.
    A valid scenario's warnings (:mod:`orchestrator.specs.caveats`) go to ``warn``, one line
    each, naming file, line and field. ``need_plan``: refuse a scenario without a plan (one
    only for ``surge capacity``), as ``surge run`` must."""
    path = Path(path)
    own = [o for o in overrides or [] if not o.startswith("topology.")]
    for_topology = [o.removeprefix("topology.") for o in overrides or [] if o not in own]
    scenario, lines = _load(path, ScenarioSpec, own)

    def at(*loc: str | int, message: str) -> Problem:
        return Problem(".".join(map(str, loc)), message, _line_of(loc, lines))

    topology_path = yamlsafe.resolve(path.parent / scenario.topology)
    why = yamlsafe.unreadable(topology_path)
    if why:
        raise SpecError(str(path), [at("topology", message=f"{why}: {topology_path}")])
    scenario = scenario.model_copy(update={"topology": topology_path})
    topology = load_topology(topology_path, for_topology)
    queue = topology.queue(scenario.workload.queue)
    if queue is None:
        declared = [q.name for q in topology.queues]
        raise SpecError(str(path), [at(
            "workload", "queue",
            message=f"queue {scenario.workload.queue!r} is not declared by topology "
                    f"{topology_path.name} (declared: {', '.join(declared) or 'none'})")])
    problems = [at("faults", i, "member", message=f"member {f.member} does not exist: topology "
                                                  f"{topology.name} has members 0 to "
                                                  f"{topology.members - 1}")
                for i, f in enumerate(scenario.faults)
                if f.member is not None and f.member >= topology.members]
    scenario, unreadable = _payloads(scenario, path)
    problems += [at(*loc, message=message) for loc, message in
                 _unsupported(scenario, topology) + unreadable
                 + _stream_problems(scenario.workload, queue)]
    problems += [at("faults", i, "kind", message=f"topology {topology.name} has no link to "
                                                 f"take down")
                 for i, f in enumerate(scenario.faults)
                 if f.kind == "link_down" and topology.link is None]
    problems += [at(*loc, message=message) for loc, message in _unserved(scenario, queue)]
    if topology.link is not None and scenario.scaling is not None:
        problems.append(at("scaling", message=f"topology {topology.name} links two clusters "
                                              "that start whole: it does not scale"))
    if queue.type == "stream" and scenario.exit.queue_empty:
        problems.append(at("exit", "queue_empty", message=f"stream {queue.name} is never "
                                                          f"empty: its messages stay"))
    if queue.per_receiver:
        problems += [at(*loc, message=message)
                     for loc, message in _per_receiver_problems(scenario, topology, queue)]
    exchanges = [e.name for e in topology.exchanges]
    if scenario.workload.exchange and scenario.workload.exchange not in exchanges:
        problems.append(at("workload", "exchange", message=f"{scenario.workload.exchange!r} is "
                           f"not an exchange of topology {topology.name} (exchanges: "
                           f"{', '.join(exchanges) or 'none'})"))
    if topology.broker == "ibmmq" and scenario.workload.exchange:
        field = "routing_keys" if scenario.workload.routing_keys else "routing_key"
        unfit = next((key for key in scenario.workload.keys if not mq_key_fits(key)), None)
        if unfit is not None:
            problems.append(at("workload", field, message=mq_key_problem(unfit)))
    if topology.broker == "ibmmq" and topology.placement == "ssh" and queue.count == 1:
        problems += [at("workload", "bind", message=m) for m in _mq_bind_problems(
            scenario.workload.bind, topology)]
    load_hosts = {h.name for h in topology.hosts if "load" in h.roles}
    for role in ("senders", "receivers"):
        problems += [at("agents_on", role, i, message=f"{name!r} is not a host with role load "
                        f"in topology {topology.name} (load hosts: "
                        f"{', '.join(sorted(load_hosts)) or 'none'})")
                     for i, name in enumerate(getattr(scenario.agents_on, role))
                     if name not in load_hosts]
    if scenario.agents_on.pods and topology.kubernetes is None:
        problems.append(at("agents_on", "pods", message=f"agent pods need a topology with a "
                                                        f"kubernetes section ({topology.name} "
                                                        f"has none)"))
    if bool(scenario.agents_on.senders) != bool(scenario.agents_on.receivers):
        problems.append(at("agents_on", message="give load hosts for both senders and "
                                                "receivers, or for neither (local agents)"))
    if queue.count > scenario.workload.receivers:
        problems.append(at("workload", "receivers",
                           message=f"{scenario.workload.receivers} receivers leave "
                                   f"{queue.count - scenario.workload.receivers} of the "
                                   f"{queue.count} queues of {queue.name} without a consumer; "
                                   f"give at least {queue.count}"))
    capacity = scenario.capacity
    if capacity is not None and capacity.members and max(capacity.members) > topology.members:
        problems.append(at("capacity", "members",
                           message=f"{max(capacity.members)} members asked for; topology "
                                   f"{topology.name} has {topology.members}"))
    if capacity is not None:
        counts = capacity.members or list(range(1, topology.members + 1))
        problems += [at("capacity", *loc, message=message)
                     for loc, message in capacity.member_problems(counts)]
    problems += [at(*loc, message=message) for loc, message in memory_problems(scenario)]
    if problems:
        raise SpecError(str(path), problems)
    for loc, message in scenario_caveats(scenario) if warn else []:
        where = f"{path}:{line}" if (line := _line_of(loc, lines)) else str(path)
        warn(one_line(f"{where}: warning: {'.'.join(map(str, loc))}: {message}"))
    if need_plan and not scenario.plan:
        raise SpecError(str(path), [Problem("plan", "no steps to run: this scenario is for "
                                                    "surge capacity")])
    return scenario, topology


RABBITMQ_ONLY = tuple((name,) for name in (
    "confirm_window", "ack_every", "heartbeat", "frame_max", "stream_offset",
    "consumer_arguments", "global_qos", "publish_transaction", "consume_transaction", "nack",
    "polling", "polling_interval", "reconnect", "reconnect_interval", "tcp_options",
    "consumer_rate", "senders_per_connection", "receivers_per_connection",
    "receiver_spacing")) + (
    ("message", "mandatory"), ("message", "properties"))
"""Workload fields only the AMQP driver has (paths within the workload)."""

NEEDS_COMMANDS = {"kill_member": ("kill_member", "start_member"),
                  "stop_member": ("stop_member", "start_member"),
                  "rolling_restart": ("stop_member", "start_member")}
"""Member faults and the commands of ``existing.commands`` they need on a cluster surge did
not start (a stopped or killed member is started again)."""


def _given(spec: Any, path: Loc) -> bool:
    """Whether the file set the field at ``path`` within ``spec`` to something else than its
    default (a spec written out whole, defaults included, asks for nothing more)."""
    for name in path:
        if name not in spec.model_fields_set:
            return False
        parent, spec = spec, getattr(spec, name)
    field = type(parent).model_fields[str(path[-1])]
    return spec != field.get_default(call_default_factory=True)


def _stream_problems(workload: WorkloadSpec, queue: QueueSpec) -> list[tuple[Loc, str]]:
    """A stream is consumed with manual acknowledgements, one subscription per receiver, from
    an offset; the offset is a stream's alone."""
    if queue.type != "stream":
        return [(("workload", "stream_offset"), f"streams only: queue {queue.name} is "
                                                f"{queue.type}")] \
            if _given(workload, ("stream_offset",)) else []
    found: list[tuple[Loc, str]] = []
    if workload.ack == "auto":
        found.append((("workload", "ack"), f"stream {queue.name} is read with manual "
                                           f"acknowledgements (the broker requires them)"))
    if workload.pattern == "request-reply":
        found.append((("workload", "pattern"), f"request-reply takes each request once: queue "
                                               f"{queue.name} is a stream"))
    if queue.count > 1 or queue.per_member:
        found.append((("workload", "queue"), f"stream {queue.name}: one stream per workload "
                                             f"(not a %d pattern nor per_member)"))
    return found


def _per_receiver_problems(scenario: ScenarioSpec, topology: TopologySpec, queue: QueueSpec
                           ) -> list[tuple[Loc, str]]:
    """A queue per receiver is reached through an exchange (its name is the broker's), takes
    each message once per receiver, and has no depth surge can read."""
    workload = scenario.workload
    found: list[tuple[Loc, str]] = []
    if not workload.exchange:
        found.append((("workload", "exchange"), f"queue {queue.name} is one per receiver, named "
                                                f"by the broker: publish to an exchange bound "
                                                f"to it"))
    elif not any(b.queue == queue.name for b in topology.bindings):
        found.append((("workload", "queue"), f"no binding of topology {topology.name} reaches "
                                             f"queue {queue.name}"))
    if workload.pattern == "request-reply":
        found.append((("workload", "pattern"), f"request-reply takes each request once: queue "
                                               f"{queue.name} is one per receiver"))
    if scenario.exit.queue_empty:
        found.append((("exit", "queue_empty"), f"queue {queue.name} is one per receiver, named "
                                               f"by the broker: its depth cannot be read"))
    return found


def _payloads(scenario: ScenarioSpec, path: Path
              ) -> tuple[ScenarioSpec, list[tuple[Loc, str]]]:
    """The scenario with its payload files resolved against its own directory, and a problem
    for each one surge cannot read or that makes too large a message."""
    message = scenario.workload.message
    if not message.payload_files:
        return scenario, []
    found: list[tuple[Loc, str]] = []
    resolved = []
    for i, name in enumerate(message.payload_files):
        file = yamlsafe.resolve(path.parent / name)
        why = yamlsafe.unreadable(file)
        if why is None and file.stat().st_size > MAX_MESSAGE_BYTES - MIN_MESSAGE_BYTES:
            why = f"larger than {MAX_MESSAGE_BYTES - MIN_MESSAGE_BYTES:,} bytes"
        if why:
            found.append((("workload", "message", "payload_files", i), f"{why}: {file}"))
        resolved.append(file)
    message = message.model_copy(update={"payload_files": resolved})
    workload = scenario.workload.model_copy(update={"message": message})
    return scenario.model_copy(update={"workload": workload}), found


def _unsupported(scenario: ScenarioSpec, topology: TopologySpec) -> list[tuple[Loc, str]]:
    """Scale-out, scale-in and member faults asked of a cluster surge did not start, without
    the commands that would do them; memory alarms and queue deletion asked of anything but
    local RabbitMQ members."""
    found: list[tuple[Loc, str]] = [
        (("faults", i, "kind"), f"{fault.kind} needs RabbitMQ members surge runs on this "
                                f"machine (placement local); topology {topology.name} is "
                                f"{topology.broker} with placement {topology.placement}")
        for i, fault in enumerate(scenario.faults) if fault.kind in LOCAL_RABBITMQ_FAULTS
        and (topology.broker, topology.placement) != ("rabbitmq", "local")]
    if topology.broker != "rabbitmq":
        found += [(("workload", *path), f"a RabbitMQ field: topology {topology.name} is "
                                        f"{topology.broker}; leave it out")
                  for path in RABBITMQ_ONLY if _given(scenario.workload, path)]
        if scenario.exit.messages_per_receiver:
            found.append((("exit", "messages_per_receiver"), f"a RabbitMQ field: topology "
                                                             f"{topology.name} is "
                                                             f"{topology.broker}"))
    if topology.placement != "existing" or topology.existing is None:
        return found
    given = topology.existing.commands

    def missing(names: tuple[str, ...]) -> str:
        lacking = [n for n in names if getattr(given, n) is None]
        return ", ".join(f"existing.commands.{n}" for n in lacking)

    scaling = scenario.scaling
    for rule, command in (("scale_out", "start_member"), ("scale_in", "stop_member")):
        if scaling is not None and getattr(scaling, rule) is not None and missing((command,)):
            found.append((("scaling", rule),
                          f"topology {topology.name} is a cluster surge did not start: "
                          f"{rule.replace('_', '-')} needs the command that does it "
                          f"(existing.commands.{command}), or remove scaling.{rule}"))
    for i, fault in enumerate(scenario.faults):
        lacking = missing(NEEDS_COMMANDS.get(fault.kind, ()))
        if lacking:
            found.append((("faults", i, "kind"),
                          f"topology {topology.name} is a cluster surge did not start: "
                          f"{fault.kind} needs {lacking} in its topology"))
    return found


def load_model(path: str | Path, model: type[BaseModel]) -> tuple[Any, dict[Loc, int]]:
    """Read and validate ``path`` as ``model`` with this module's file/line errors; also return
    the line of every field, so a caller can point problems found later at the file."""
    path = Path(path)
    document, lines = read_document(path)
    return _validate(path, model, document, lines), lines


def _load(path: Path, model: type[BaseModel], overrides: list[str]) -> tuple[Any, dict[Loc, int]]:
    document, lines = read_document(path)
    for override in overrides:
        _apply_override(path, document, override)
    return _validate(path, model, document, lines), lines


def _validate(path: Path, model: type[BaseModel], document: Any, lines: dict[Loc, int]):
    """``document`` as ``model``; every problem, of a field or between fields, at its line."""
    try:
        spec = model.model_validate(document, context={**COLLECT, "base_dir": path.parent})
    except ValidationError as error:
        problems = [_problem(model, err, lines) for err in error.errors()]
        raise SpecError(str(path), problems) from None
    found = cross_problems(spec) if isinstance(spec, Spec) else []
    if found:
        raise SpecError(str(path), [Problem(".".join(map(str, loc)), message,
                                            _line_of(loc, lines)) for loc, message in found])
    return spec


def read_document(path: Path) -> tuple[dict[str, Any], dict[Loc, int]]:
    """A YAML file's mapping and the line of each key path in it."""
    document, node = yamlsafe.read_file(path)
    lines: dict[Loc, int] = {}
    _index_lines(node, (), lines, set())
    return document, lines


def _index_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int], seen: set[int]) -> None:
    """The line of every field path under ``node``; a node met again through an alias is not
    walked again (its fields keep the lines of where it is written)."""
    lines.setdefault(loc, node.start_mark.line + 1)
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[loc + (key.value,)] = key.start_mark.line + 1
            _index_lines(value, loc + (key.value,), lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, loc + (index,), lines, seen)


def _line_of(loc: Loc, lines: dict[Loc, int]) -> int | None:
    """The line of ``loc``, or of the nearest field around it that the file has."""
    return next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)


def _apply_override(path: Path, document: dict, override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise SpecError(str(path),
                        [Problem(override, "an override must look like field.path=value")])
    try:
        value = yamlsafe.parse_value(raw) if raw.strip() else ""
    except ValueError as error:
        raise SpecError(str(path), [Problem(key, f"--set value {raw!r} cannot be read: "
                                                 f"{error}")]) from None
    parts: list[str | int] = [int(p) if p.isdecimal() and len(p) < 10 else p
                              for p in key.split(".")]
    target: Any = document
    for depth, part in enumerate(parts[:-1]):
        try:
            target = target[part]
        except (KeyError, IndexError, TypeError):
            target = _create_branch(path, target, part, ".".join(map(str, parts[:depth + 1])))
    try:
        target[parts[-1]] = value
    except (IndexError, TypeError):
        raise SpecError(str(path), [Problem(key, "--set path does not exist")]) from None


def _create_branch(path: Path, target: Any, part: str | int, where: str) -> dict:
    if not isinstance(target, dict) or isinstance(part, int):
        raise SpecError(str(path), [Problem(where, "--set path does not exist")])
    target[part] = {}
    return target[part]


def _problem(model: type[BaseModel], err: dict, lines: dict[Loc, int]) -> Problem:
    loc: Loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc)
    line = _line_of(loc, lines)
    if err["type"] == "extra_forbidden":
        known = _fields_at(model, loc[:-1])
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {guess[0]!r}?" if guess else ""
        return Problem(field, f"unknown field{hint} (known: {', '.join(known)})", line)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        message = "required field is missing"
    elif "input" in err and not isinstance(err["input"], (dict, list)) \
            and err["type"] != INLINE_SECRET \
            and repr(err["input"]) not in message:
        message = f"{message} (got {err['input']!r})"
    return Problem(field, message, line)


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, str):
            current = _unwrap(current.model_fields[part].annotation)
        if current is None:
            return []
    return sorted(current.model_fields) if _is_model(current) else []


def _unwrap(annotation: Any) -> Any:
    """The model class inside ``X | None`` or ``list[X]``, if any."""
    if _is_model(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _unwrap(arg)
        if found is not None:
            return found
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _mq_bind_problems(bind: str, topology: TopologySpec) -> list[str]:
    """What is wrong with ``workload.bind`` on an IBM MQ uniform cluster over SSH: not-fixed
    needs cluster queues to spread over; on-open cannot be used on cluster queues by clients
    that reconnect anywhere (MQ refuses the MQOPEN with MQRC_RECONNECT_INCOMPATIBLE, 2547: the
    cluster's balancing may move them away from the instance they are bound to)."""
    mq = topology.ibmmq
    if bind == "not-fixed" and not mq.cluster_queues:
        return [f"not-fixed spreads messages over the instances of a cluster queue: set "
                f"ibmmq.cluster_queues: true in topology {topology.name} (else each message "
                f"stays on its sender's queue manager)"]
    if bind == "on-open" and mq.cluster_queues and mq.reconnect == "yes":
        return [f"on-open is refused by MQ on a uniform cluster's cluster queues for clients "
                f"that reconnect to any member (MQRC_RECONNECT_INCOMPATIBLE 2547): set "
                f"ibmmq.reconnect: qmgr or no in topology {topology.name}, or bind: not-fixed"]
    return []


def _unserved(scenario: ScenarioSpec, queue: QueueSpec) -> list[tuple[Loc, str]]:
    """Request/reply steps that start fewer responders than their requesters' queues need:
    requesters and responders fill the queues of a pattern in blocks (document 004's pairs),
    so a count that is not a whole number of blocks leaves a queue's requests unanswered."""
    workload = scenario.workload
    if workload.pattern != "request-reply" or queue.count == 1:
        return []
    found: list[tuple[Loc, str]] = []
    for index, step in enumerate(scenario.plan):
        for phase in plans.expand([step]):
            if phase.receivers is None:
                continue
            sending = phase.senders or workload.senders
            missing = sorted({queue.slot(i, workload.senders) for i in range(sending)}
                             - {queue.slot(i, workload.receivers) for i in range(phase.receivers)})
            if missing:
                names = ", ".join(queue.names[m] for m in missing)
                found.append((("plan", index, "receivers"), (
                    f"{phase.receivers} responders beside {sending} requesters leave {names} "
                    f"unanswered: the {workload.receivers} responders fill the "
                    f"{queue.count} queues in blocks of {workload.receivers / queue.count:g}, "
                    f"the requesters in blocks of {workload.senders / queue.count:g}")))
                break
    return found
