"""Load spec files from YAML into typed models, with errors that name file, field and line.

``--set a.b=value`` overrides are applied to the parsed document before validation, so they
are checked exactly like the file. Unknown keys get a did-you-mean from the model's fields.
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import SpecError
from orchestrator.specs import ScenarioSpec, TopologySpec

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where it is and what was expected."""

    field: str
    message: str
    line: int | None = None


def load_topology(path: str | Path, overrides: list[str] | None = None) -> TopologySpec:
    """Read and validate a topology file (plus ``key=value`` overrides)."""
    return _load(Path(path), TopologySpec, overrides or [])


def load_scenario(path: str | Path, overrides: list[str] | None = None
                  ) -> tuple[ScenarioSpec, TopologySpec]:
    """Read a scenario and the topology it names; ``topology.*`` overrides go to the topology."""
    path = Path(path)
    own = [o for o in overrides or [] if not o.startswith("topology.")]
    for_topology = [o.removeprefix("topology.") for o in overrides or [] if o not in own]
    scenario = _load(path, ScenarioSpec, own)
    topology_path = scenario.topology
    if not topology_path.is_absolute():
        topology_path = (path.parent / topology_path).resolve()
    if not topology_path.exists():
        raise SpecError(str(path), [Problem("topology", f"file not found: {topology_path}")])
    scenario = scenario.model_copy(update={"topology": topology_path})
    topology = load_topology(topology_path, for_topology)
    if topology.queue(scenario.workload.queue) is None:
        declared = [q.name for q in topology.queues]
        raise SpecError(str(path), [Problem(
            "workload.queue",
            f"queue {scenario.workload.queue!r} is not declared by topology {topology_path.name} "
            f"(declared: {', '.join(declared) or 'none'})")])
    problems = [Problem(f"faults.{i}.member", f"member {f.member} does not exist: topology "
                                             f"{topology.name} has members 0 to "
                                             f"{topology.members - 1}")
               for i, f in enumerate(scenario.faults)
               if f.member is not None and f.member >= topology.members]
    load_hosts = {h.name for h in topology.hosts if "load" in h.roles}
    for role in ("senders", "receivers"):
        problems += [Problem(f"agents_on.{role}", f"{name!r} is not a host with role load in "
                             f"topology {topology.name} (load hosts: "
                             f"{', '.join(sorted(load_hosts)) or 'none'})")
                     for name in getattr(scenario.agents_on, role) if name not in load_hosts]
    if scenario.agents_on.pods and topology.kubernetes is None:
        problems.append(Problem("agents_on.pods", f"agent pods need a topology with a "
                                                  f"kubernetes section ({topology.name} has "
                                                  f"none)"))
    if bool(scenario.agents_on.senders) != bool(scenario.agents_on.receivers):
        problems.append(Problem("agents_on", "give load hosts for both senders and receivers, "
                                             "or for neither (local agents)"))
    queue = topology.queue(scenario.workload.queue)
    if queue.count > scenario.workload.receivers:
        problems.append(Problem("workload.receivers", f"{scenario.workload.receivers} receivers "
                               f"leave {queue.count - scenario.workload.receivers} of the "
                               f"{queue.count} queues of {queue.name} without a consumer; give "
                               f"at least {queue.count}"))
    if problems:
        raise SpecError(str(path), problems)
    return scenario, topology


def load_any(path: str | Path) -> BaseModel:
    """Validate a file as whichever spec it is, for ``surge validate``: a campaign has
    ``cells`` (and every scenario and matrix combination it names is validated too), a
    scenario has ``plan``, anything else is a topology."""
    path = Path(path)
    document, _ = _read(path)
    if "cells" in document:
        from orchestrator.campaign_spec import load_campaign  # it imports this module
        return load_campaign(path).spec
    if "plan" in document:
        return load_scenario(path)[0]
    return load_topology(path)


def load_model(path: str | Path, model: type[BaseModel]) -> tuple[Any, dict[Loc, int]]:
    """Read and validate ``path`` as ``model`` with this module's file/line errors; also return
    the line of every field, so a caller can point problems found later at the file."""
    path = Path(path)
    document, lines = _read(path)
    return _validate(path, model, document, lines), lines


def _load(path: Path, model: type[BaseModel], overrides: list[str]):
    document, lines = _read(path)
    for override in overrides:
        _apply_override(path, document, override)
    return _validate(path, model, document, lines)


def _validate(path: Path, model: type[BaseModel], document: Any, lines: dict[Loc, int]):
    try:
        return model.model_validate(document)
    except ValidationError as error:
        problems = [_problem(model, err, lines) for err in error.errors()]
        raise SpecError(str(path), problems) from None


def _read(path: Path) -> tuple[Any, dict[Loc, int]]:
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(str(path), [Problem("", f"cannot read file: {error.strerror}")]) from None
    try:
        node = yaml.compose(text, Loader=_SpecLoader)
        document = yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark else None
        reason = getattr(error, "problem", None) or str(error)
        raise SpecError(str(path), [Problem("", f"not valid YAML: {reason}", line)]) from None
    if not isinstance(document, dict):
        raise SpecError(str(path), [Problem("", "expected a mapping of fields at the top level")])
    lines: dict[Loc, int] = {}
    _index_lines(node, (), lines)
    return document, lines


class PlusSigned(float):
    """A number written with an explicit ``+`` (``+50``): a step increment, not an absolute rate."""

    def __str__(self) -> str:
        return "+" + format(float(self), "g")


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that remembers an explicit ``+`` sign on numbers."""


def _construct_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
    value = (yaml.SafeLoader.construct_yaml_int if node.tag.endswith(":int")
             else yaml.SafeLoader.construct_yaml_float)(loader, node)
    return PlusSigned(value) if str(node.value).startswith("+") else value


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _construct_number)
_SpecLoader.add_constructor("tag:yaml.org,2002:float", _construct_number)


def _index_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> None:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[loc + (key.value,)] = key.start_mark.line + 1
            _index_lines(value, loc + (key.value,), lines)
            lines[loc + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, loc + (index,), lines)


def _apply_override(path: Path, document: dict, override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise SpecError(str(path),
                        [Problem(override, "an override must look like field.path=value")])
    value = yaml.load(raw, Loader=_SpecLoader) if raw.strip() else ""  # noqa: S506
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.split(".")]
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
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
    if err["type"] == "extra_forbidden":
        known = _fields_at(model, loc[:-1])
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {guess[0]!r}?" if guess else ""
        return Problem(field, f"unknown field{hint} (known: {', '.join(known)})", line)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        message = "required field is missing"
    elif "input" in err and not isinstance(err["input"], (dict, list)) \
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
