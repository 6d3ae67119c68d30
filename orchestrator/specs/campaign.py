"""Campaign files: the spec models, the expansion of a matrix into cells with stable ids, and
validation of every scenario a campaign names under every combination of its overrides.

A campaign file (``campaigns/<name>.yaml``)::

    name: smoke                    # the campaign directory: <campaign runs dir>/smoke/
    description: quickstart on 3 and 5 members, small and large messages
    repetitions: 2
    requirement: {rate_within: 5%, lossless: true}
    cells:
      - scenario: ../scenarios/quickstart.yaml     # relative to the campaign file
        set: {plan.0.hold: 5s}                      # overrides every cell of this entry gets
        matrix:                                     # every combination of these values
          topology.members: [3, 5]
          workload.message.size: [2KiB, 20KiB]

Every entry of ``cells`` expands into every combination of its matrix, repeated
``repetitions`` times (all combinations once, then all again). The cell id
(``003-quickstart-members=5,size=2KiB-r1``) depends only on the campaign file. Overrides given
with the command (``surge campaign FILE --set key=value``) go to every cell after its own, as
``surge run --set`` goes after the scenario file; they may not name a key a matrix varies.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, field_validator

from orchestrator.errors import SpecError
from orchestrator.specs import plan as plans
from orchestrator.specs import yamlsafe
from orchestrator.specs.base import FilePath, Fraction, Loc, SafeName, Seconds, Spec
from orchestrator.specs.limits import Number
from orchestrator.specs.loader import PlusSigned, Problem, load_model, load_scenario
from orchestrator.specs.prices import MAX_PRICE_PER_CORE_HOUR
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.tables import DocumentTable
from orchestrator.specs.topology import TopologySpec

MAX_CELLS = 10_000
"""Most cells (runs) a campaign may have, repetitions included; counted before expanding."""
MAX_MATRIX_KEYS = 32
"""Most keys one matrix may vary."""

_KEY = re.compile(r"[A-Za-z_][\w-]*(\.[\w-]+)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_ID = 150


def override_text(value: object) -> str:
    """A YAML value as the text after ``=`` in an override that reads back as the same value:
    ``3`` -> ``"3"``, ``+50`` stays ``"+50"``, the string ``"yes"`` becomes ``"'yes'"``."""
    if isinstance(value, PlusSigned):
        return str(value)
    if isinstance(value, str) and _reads_back(value):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _reads_back(text: str) -> bool:
    try:
        return yamlsafe.parse_value(text or "''") == text
    except ValueError:
        return False


OverrideValue = Annotated[str, BeforeValidator(
    override_text, json_schema_input_type=Any)]  # any YAML value, written as --set text


def _check_keys(keys: list[str]) -> None:
    bad = [key for key in keys if not _KEY.fullmatch(key)]
    if bad:
        raise ValueError(f"expected field paths such as workload.senders or topology.members, "
                         f"got {', '.join(map(repr, bad))}")


class Requirement(Spec):
    """What every run of a campaign must show to pass; only runs that pass are ranked."""

    rate_within: Fraction = Field(
        0.05, ge=0, description="each considered step's achieved mean within this of its "
                                "target ('5%'); a step with target 0 (as fast as possible) passes")
    rate: Literal["achieved", "published"] = Field(
        "achieved", description="achieved: end to end (what consumers got); published: what "
                                "the senders put, whatever the consumers did (document 001: "
                                "publishing must not suffer while consumers are slow)")
    steps: Literal["all", "final"] = Field(
        "all", description="which steps rate_within and p99_below apply to")
    lossless: bool = Field(True, description="nothing lost and nothing unexplained in the "
                                             "accounting; duplicates (redeliveries after a "
                                             "broker failure) are at-least-once and allowed")
    p99_below: Seconds | None = Field(
        None, gt=0, description="each considered step's p99 latency below this ('200ms')")

    def describe(self) -> str:
        """The requirement in words, for the summary."""
        which = "every step's" if self.steps == "all" else "the final step's"
        parts = [f"{which} {self.rate} rate within ±{self.rate_within:.0%} of its target"]
        if self.p99_below is not None:
            parts.append(f"p99 below {self.p99_below * 1000:g} ms")
        if self.lossless:
            parts.append("nothing lost (duplicates allowed: at least once)")
        return "; ".join(parts)


class CellGroupSpec(Spec):
    """One entry of ``cells``: a scenario, overrides all its cells get, and a matrix of
    overrides whose every combination is a cell. Keys are ``--set`` paths (``topology.*``
    goes to the topology); the key ``topology`` names a topology file (relative to the
    campaign file) instead of the scenario's."""

    scenario: FilePath = Field(description="scenario file, relative to the campaign file")
    set: dict[str, OverrideValue] = Field(
        default_factory=dict, description="overrides for every cell, e.g. {plan.0.hold: 5s}")
    matrix: dict[str, list[OverrideValue]] = Field(
        default_factory=dict, max_length=MAX_MATRIX_KEYS,
        description="field path -> values; every combination is a cell")

    @field_validator("set")
    @classmethod
    def _set_keys(cls, value: dict[str, str]) -> dict[str, str]:
        _check_keys(list(value))
        return value

    @field_validator("matrix")
    @classmethod
    def _matrix_keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        _check_keys(list(value))
        empty = [key for key, values in value.items() if not values]
        if empty:
            raise ValueError(f"give at least one value for {', '.join(empty)}")
        return value

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A key is in ``set`` or in ``matrix``, not both."""
        return [(("matrix", key), "in both set and matrix; keep one")
                for key in sorted(set(self.set) & set(self.matrix))]

    def combinations(self) -> int:
        """How many combinations the matrix has, computed (capped just above
        :data:`MAX_CELLS`), never expanded."""
        count = 1
        for values in self.matrix.values():
            count = min(count * len(values), MAX_CELLS + 1)
        return count


class CampaignSpec(Spec):
    """A campaign: cells to run, how often, and what each run must show."""

    name: SafeName = Field(description="the campaign directory's name")
    description: str = Field("", description="what it compares and which document it follows")
    repetitions: int = Field(1, ge=1, le=1000, description="runs of every combination")
    price_per_core_hour: Number | None = Field(
        None, gt=0, le=MAX_PRICE_PER_CORE_HOUR,
        description="for the cost ranking; default: surge analyze's")
    requirement: Requirement = Field(
        default_factory=Requirement, description="what every run must show to count")
    cells: list[CellGroupSpec] = Field(
        min_length=1, description="scenarios with their overrides and matrices")
    tables: list[DocumentTable] = Field(
        default_factory=list, description="source documents' tables printed over the done "
        "cells at the end, e.g. [000-table2] (surge table lists them)")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """At most :data:`MAX_CELLS` cells, counted before any is built: at the entry of
        ``cells`` that goes past the limit."""
        total = 0
        for index, group in enumerate(self.cells):
            cells = group.combinations() * self.repetitions
            if total + cells > MAX_CELLS:
                where = ("cells", index, "matrix") if group.matrix else ("cells", index)
                exact = group.combinations() <= MAX_CELLS
                size = f"{cells:,}" if exact else f"more than {MAX_CELLS:,}"
                return [(where, f"the campaign comes to more than {MAX_CELLS:,} cells here "
                                f"(this entry: {size}, with {self.repetitions} repetitions); "
                                f"split it or narrow the matrix")]
            total += cells
        return []


# -- expansion ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """One run of a campaign: a scenario with overrides, one repetition of one combination."""

    id: str
    group: int  # index of its entry in ``cells``
    scenario: Path
    fixed: tuple[tuple[str, str], ...]  # the entry's ``set``
    params: tuple[tuple[str, str], ...]  # this combination of the entry's ``matrix``
    repetition: int
    given: tuple[tuple[str, str], ...] = ()  # the command's ``--set``, for every cell

    @property
    def overrides(self) -> list[str]:
        """The ``key=value`` overrides of this cell, as ``--set`` takes them: its entry's,
        its combination's, then the command's."""
        return [f"{key}={value}" for key, value in (*self.fixed, *self.params, *self.given)]

    @property
    def combination(self) -> str:
        """What the repetitions of one combination share: its entry, scenario and values."""
        values = ",".join(f"{key}={value}" for key, value in self.params)
        return f"cells.{self.group} {self.scenario.stem} {values}".rstrip()


def short_names(keys: list[str]) -> dict[str, str]:
    """The shortest dotted suffix of each key that no other key ends with:
    ``workload.message.size`` is ``size``; ``plan.0.hold`` and ``plan.1.hold`` are
    ``0.hold`` and ``1.hold``."""
    names = {}
    for key in keys:
        parts = key.split(".")
        suffixes = (".".join(parts[-n:]) for n in range(1, len(parts) + 1))
        names[key] = next(s for s in suffixes if not any(
            other != key and (other == s or other.endswith("." + s)) for other in keys))
    return names


def cell_id(number: int, scenario: str, labels: list[tuple[str, str]], repetition: int) -> str:
    """``003-quickstart-members=5,size=2KiB-r1``: readable, sortable and safe as a directory
    name (other characters become ``_``; a very long id is cut and keeps a digest)."""
    label = ",".join(f"{name}={value}" for name, value in labels)
    text = "-".join(part for part in (f"{number:03d}", scenario, label) if part)
    text = _UNSAFE.sub("_", text)
    if len(text) > _MAX_ID:
        text = text[:_MAX_ID - 9] + "~" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{text}-r{repetition}"


def _label_value(key: str, value: str) -> str:
    """How a cell's id shows one matrix value: a topology by its file's name, capacity
    conditions by their names, anything else as written."""
    if key == "topology":
        return Path(value).stem
    if key == "capacity.conditions":
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            return "+".join(str(c["name"]) for c in yamlsafe.parse_value(value))
    return value


def expand_cells(spec: CampaignSpec, given: tuple[tuple[str, str], ...] = ()) -> list[Cell]:
    """Every cell of a campaign in a fixed order: entry by entry; within an entry, repetition
    by repetition, every matrix combination (the first key varies slowest); ``given``: the
    command's overrides, for every cell."""
    cells: list[Cell] = []
    for group_index, group in enumerate(spec.cells):
        names = short_names(list(group.matrix))
        combinations = list(itertools.product(
            *[[(key, value) for value in values] for key, values in group.matrix.items()]))
        for repetition in range(1, spec.repetitions + 1):
            for combination in combinations:
                labels = [(names[key], _label_value(key, value)) for key, value in combination]
                cells.append(Cell(
                    id=cell_id(len(cells) + 1, group.scenario.stem, labels, repetition),
                    group=group_index, scenario=group.scenario,
                    fixed=tuple(group.set.items()), params=tuple(combination),
                    repetition=repetition, given=given))
    return cells


# -- loading and validation -----------------------------------------------------------------

@dataclass(frozen=True)
class Campaign:
    """A validated campaign: its file, spec, cells and each cell's resolved specs."""

    path: Path
    spec: CampaignSpec
    cells: list[Cell]
    specs: dict[str, tuple[ScenarioSpec, TopologySpec]]  # by cell id

    def planned_s(self, cell: Cell) -> float:
        """Seconds of load the cell's plan asks for (a capacity search's are not known
        ahead: its typical probes at the longest hold)."""
        scenario = self.specs[cell.id][0]
        if scenario.capacity is not None:
            search = scenario.capacity
            return 10 * (scenario.measure.settle + search.hold_max + search.drain / 4)
        return plans.duration(plans.expand(scenario.plan))


def load_campaign(path: str | Path, overrides: list[str] | None = None) -> Campaign:
    """Read a campaign and validate it with every scenario it names under every combination
    of overrides; each problem names the campaign file and the field that caused it (e.g.
    ``cells.0.matrix.workload.senders``, ``--set topology.members``) or, for a broken
    scenario, that scenario's file. ``overrides``: the command's ``--set key=value`` for every
    cell (a ``topology`` file relative to the cell's scenario)."""
    path = Path(path)
    spec, lines = load_model(path, CampaignSpec)
    spec = _resolve_paths(spec, yamlsafe.resolve(path).parent)
    cells = expand_cells(spec, _given(str(path), spec, overrides or []))
    loaded: dict[tuple, tuple[ScenarioSpec, TopologySpec]] = {}
    own: dict[Path, list[tuple[str, Problem]]] = {}  # each scenario's problems without overrides
    problems: dict[tuple[str, str], Problem] = {}  # one per campaign field and original message
    for cell in cells:
        key = (cell.scenario, tuple(cell.overrides))
        if key in loaded or not _scenario_exists(cell, lines, problems):
            continue
        specs, found = _try_load(cell.scenario, cell.overrides)
        if specs:
            loaded[key] = specs
            continue
        if cell.scenario not in own:
            own[cell.scenario] = _try_load(cell.scenario, [])[1]
        for origin, problem in found:
            blamed = _blame(origin, problem, cell, lines, (origin, problem) in own[cell.scenario])
            problems.setdefault((blamed.field, problem.message), blamed)
    if problems:
        raise SpecError(str(path), list(problems.values()))
    specs = {cell.id: loaded[(cell.scenario, tuple(cell.overrides))] for cell in cells}
    several = {("cells", cell.group, "scenario") for cell in cells
               if (found := specs[cell.id][0].capacity) and len(found.conditions) > 1}
    if several:
        raise SpecError(str(path), [Problem(".".join(map(str, where)), "a capacity cell searches "
                                            "under one condition: expected capacity.conditions "
                                            "with at most one entry (vary it with matrix: "
                                            "capacity.conditions)", lines.get(where))
                                    for where in sorted(several)])
    return Campaign(path, spec, cells, specs)


def _resolve_paths(spec: CampaignSpec, base: Path) -> CampaignSpec:
    """Scenario files and ``topology`` values made absolute, relative to the campaign file."""
    def resolve(key: str, value: str) -> str:
        return str(yamlsafe.resolve(base / value)) if key == "topology" else value
    groups = [group.model_copy(update={
        "scenario": yamlsafe.resolve(base / group.scenario),
        "set": {k: resolve(k, v) for k, v in group.set.items()},
        "matrix": {k: [resolve(k, v) for v in vs] for k, vs in group.matrix.items()}})
        for group in spec.cells]
    return spec.model_copy(update={"cells": groups})


def _overlap(key: str, other: str) -> bool:
    """Whether two override keys set some field alike (``topology``, a file, is no field of
    ``topology.members``)."""
    if "topology" in (key, other):
        return key == other
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


def _given(path: str, spec: CampaignSpec, overrides: list[str]) -> tuple[tuple[str, str], ...]:
    """The command's overrides as ``(key, value)`` pairs (a ``topology`` file relative to each
    cell's scenario, as ``surge run --set topology=`` is); a :class:`SpecError` for one that is
    no ``key=value`` or names a key a matrix varies (its cells would all be alike)."""
    pairs, problems = [], []
    for override in overrides:
        key, sep, value = override.partition("=")
        where = f"--set {key}"
        if not sep or not _KEY.fullmatch(key):
            problems.append(Problem(f"--set {override}", "expected field.path=value, e.g. "
                                                         "plan.0.hold=5s or topology.members=3"))
            continue
        varied = [f"cells.{i}.matrix" for i, group in enumerate(spec.cells)
                  if any(_overlap(key, name) for name in group.matrix)]
        if varied:
            problems.append(Problem(where, f"{', '.join(varied)} varies it; a --set would make "
                                           f"those cells alike (change the campaign instead)"))
            continue
        pairs.append((key, value))
    if problems:
        raise SpecError(path, problems)
    return tuple(pairs)


def _scenario_exists(cell: Cell, lines: dict, problems: dict[tuple[str, str], Problem]
                     ) -> bool:
    why = yamlsafe.unreadable(cell.scenario)
    if why is None:
        return True
    where = ("cells", cell.group, "scenario")
    problem = Problem(".".join(map(str, where)), f"{why}: {cell.scenario}", lines.get(where))
    problems[(problem.field, problem.message)] = problem
    return False


def _try_load(scenario: Path, overrides: list[str]
              ) -> tuple[tuple[ScenarioSpec, TopologySpec] | None, list[tuple[str, Problem]]]:
    try:
        return load_scenario(scenario, overrides), []
    except SpecError as error:
        return None, [(error.path, problem) for problem in error.problems]


def _blame(path: str, problem: Problem, cell: Cell, lines: dict, intrinsic: bool) -> Problem:
    """A problem of a scenario (or its topology, ``path``) loaded with a cell's overrides, as
    a problem of the campaign file: at the ``scenario`` of the cell's entry if the scenario has
    it without overrides too, otherwise at the override that caused it."""
    def at(*where: str | int, message: str) -> Problem:
        return Problem(".".join(map(str, where)), message, lines.get(where))
    if intrinsic:
        origin = f"{path}:{problem.line}" if problem.line else path
        detail = f"{problem.field}: {problem.message}" if problem.field else problem.message
        return at("cells", cell.group, "scenario", message=f"{origin}: {detail}")
    field_ = problem.field if path == str(cell.scenario) else \
        ".".join(p for p in ("topology", problem.field) if p)
    pairs = [("set", key, value) for key, value in cell.fixed] + \
            [("matrix", key, value) for key, value in cell.params] + \
            [("--set", key, value) for key, value in cell.given]
    culprit = next((pair for pair in reversed(pairs) if field_ == pair[1] or field_.startswith(
        pair[1] + ".") or pair[1].startswith(field_ + ".")), None)
    if culprit:
        kind, key, value = culprit
        message = f"{problem.message} (scenario {cell.scenario.name} with {key}={value})"
        if kind == "--set":
            return Problem(f"--set {key}", message)
        return at("cells", cell.group, kind, key, message=message)
    kind = "matrix" if cell.params else "set"
    return at("cells", cell.group, kind, message=f"{field_}: {problem.message} (scenario "
              f"{cell.scenario.name} with {', '.join(cell.overrides)})")


