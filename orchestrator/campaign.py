"""Campaigns: a matrix of scenarios x parameters x repetitions, each cell a normal run.

A campaign file (``campaigns/<name>.yaml``)::

    name: smoke                    # the campaign directory: <campaigns dir>/smoke/
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
``repetitions`` times (all combinations once, then all again). Each cell is one run, with
``--set`` style overrides, recorded as ``<campaign dir>/<cell id>/``. The cell id
(``003-quickstart-members=5,size=2KiB-r1``) depends only on the campaign file, so running the
file again resumes: completed cells are kept, the others run (an unfinished attempt's directory
is renamed aside first, never deleted). Cells run grouped by topology; each topology is brought
up before its cells and torn down after them.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, field_validator, model_validator
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from orchestrator import plan as plans
from orchestrator.errors import SpecError, SurgeError
from orchestrator.liveview import ViewState, plain_line
from orchestrator.loader import PlusSigned, Problem, load_model, load_scenario
from orchestrator.specs import Fraction, ScenarioSpec, Seconds, Spec, TopologySpec

if TYPE_CHECKING:
    from topologies.rabbitmq.local import LocalRabbitMQ

STATE_FILE = "campaign.json"
SUMMARY_FILE = "summary.md"
DEFAULT_OVERHEAD_S = 20.0  # per cell until one is measured: agents, drain, accounting
_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_ID = 150


# -- the spec -----------------------------------------------------------------------------------

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
        return yaml.safe_load(text or "''") == text
    except yaml.YAMLError:
        return False


OverrideValue = Annotated[str, BeforeValidator(override_text)]


def _check_keys(keys: list[str]) -> None:
    bad = [key for key in keys if not _KEY.match(key)]
    if bad:
        raise ValueError(f"expected field paths such as workload.senders or topology.members, "
                         f"got {', '.join(map(repr, bad))}")


class Requirement(Spec):
    """What every run of a campaign must show to pass; only runs that pass are ranked."""

    rate_within: Fraction = Field(
        0.05, ge=0, description="each considered step's achieved mean within this of its "
                                "target ('5%'); a step with target 0 (as fast as possible) passes")
    steps: Literal["all", "final"] = Field(
        "all", description="which steps rate_within and p99_below apply to")
    lossless: bool = Field(True, description="the accounting balances: nothing lost or "
                                             "duplicated")
    p99_below: Seconds | None = Field(
        None, gt=0, description="each considered step's p99 latency below this ('200ms')")

    def describe(self) -> str:
        """The requirement in words, for the summary."""
        which = "every step's" if self.steps == "all" else "the final step's"
        parts = [f"{which} achieved rate within ±{self.rate_within:.0%} of its target"]
        if self.p99_below is not None:
            parts.append(f"p99 below {self.p99_below * 1000:g} ms")
        if self.lossless:
            parts.append("the accounting balances (nothing lost or duplicated)")
        return "; ".join(parts)


class CellGroupSpec(Spec):
    """One entry of ``cells``: a scenario, overrides all its cells get, and a matrix of
    overrides whose every combination is a cell. Keys are ``--set`` paths (``topology.*``
    goes to the topology); the key ``topology`` names a topology file (relative to the
    campaign file) instead of the scenario's."""

    scenario: Path = Field(description="scenario file, relative to the campaign file")
    set: dict[str, OverrideValue] = Field(
        default_factory=dict, description="overrides for every cell, e.g. {plan.0.hold: 5s}")
    matrix: dict[str, list[OverrideValue]] = Field(
        default_factory=dict, description="field path -> values; every combination is a cell")

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

    @model_validator(mode="after")
    def _set_or_matrix(self) -> CellGroupSpec:
        both = sorted(set(self.set) & set(self.matrix))
        if both:
            raise ValueError(f"{', '.join(both)}: in both set and matrix; keep one")
        return self


class CampaignSpec(Spec):
    """A campaign: cells to run, how often, and what each run must show."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="the campaign directory's name")
    description: str = Field("", description="what it compares and which document it follows")
    repetitions: int = Field(1, ge=1, le=1000, description="runs of every combination")
    price_per_core_hour: float | None = Field(
        None, gt=0, description="for the cost ranking; default: surge analyze's")
    requirement: Requirement = Field(default_factory=Requirement)
    cells: list[CellGroupSpec] = Field(min_length=1)


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

    @property
    def overrides(self) -> list[str]:
        """The ``key=value`` overrides of this cell, as ``--set`` takes them."""
        return [f"{key}={value}" for key, value in (*self.fixed, *self.params)]

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
    return Path(value).stem if key == "topology" else value


def expand_cells(spec: CampaignSpec) -> list[Cell]:
    """Every cell of a campaign in a fixed order: entry by entry; within an entry, repetition
    by repetition, every matrix combination (the first key varies slowest)."""
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
                    repetition=repetition))
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
        """Seconds of load the cell's plan asks for."""
        return plans.duration(plans.expand(self.specs[cell.id][0].plan))


def load_campaign(path: str | Path) -> Campaign:
    """Read a campaign and validate it with every scenario it names under every combination
    of overrides; each problem names the campaign file and the field that caused it (e.g.
    ``cells.0.matrix.workload.senders``) or, for a broken scenario, that scenario's file."""
    path = Path(path)
    spec, lines = load_model(path, CampaignSpec)
    spec = _resolve_paths(spec, path.resolve().parent)
    cells = expand_cells(spec)
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
        raise SpecError(str(path), sorted(problems.values(), key=lambda p: p.line or 0))
    specs = {cell.id: loaded[(cell.scenario, tuple(cell.overrides))] for cell in cells}
    return Campaign(path, spec, cells, specs)


def _resolve_paths(spec: CampaignSpec, base: Path) -> CampaignSpec:
    """Scenario files and ``topology`` values made absolute, relative to the campaign file."""
    def resolve(key: str, value: str) -> str:
        return str((base / value).resolve()) if key == "topology" else value
    groups = [group.model_copy(update={
        "scenario": (base / group.scenario).resolve(),
        "set": {k: resolve(k, v) for k, v in group.set.items()},
        "matrix": {k: [resolve(k, v) for v in vs] for k, vs in group.matrix.items()}})
        for group in spec.cells]
    return spec.model_copy(update={"cells": groups})


def _scenario_exists(cell: Cell, lines: dict, problems: dict[tuple[str, str], Problem]
                     ) -> bool:
    if cell.scenario.is_file():
        return True
    where = ("cells", cell.group, "scenario")
    problem = Problem(".".join(map(str, where)), f"file not found: {cell.scenario}",
                      lines.get(where))
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
            [("matrix", key, value) for key, value in cell.params]
    culprit = next((pair for pair in pairs if field_ == pair[1] or field_.startswith(
        pair[1] + ".") or pair[1].startswith(field_ + ".")), None)
    if culprit:
        kind, key, value = culprit
        return at("cells", cell.group, kind, key, message=f"{problem.message} (scenario "
                  f"{cell.scenario.name} with {key}={value})")
    kind = "matrix" if cell.params else "set"
    return at("cells", cell.group, kind, message=f"{field_}: {problem.message} (scenario "
              f"{cell.scenario.name} with {', '.join(cell.overrides)})")


# -- the requirement ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """Whether a run met its campaign's requirement, and why in one line."""

    passed: bool
    reason: str


def judge(requirement: Requirement, manifest: dict[str, Any]) -> Verdict:
    """Judge one run from its ``run.json``: it must have completed, with a step table, every
    considered step's achieved rate within ``rate_within`` of its target (and p99 below
    ``p99_below``), and, if ``lossless``, balanced accounting."""
    outcome = manifest.get("outcome")
    if outcome != "completed":
        return Verdict(False, f"run not completed (outcome {outcome or 'unknown'})")
    steps = manifest.get("steps") or []
    if not steps:
        return Verdict(False, "no step table (is every hold longer than measure.settle?)")
    considered = steps if requirement.steps == "all" else steps[-1:]
    problems = [problem for problem in (
        _rate_problem(requirement.rate_within, considered),
        _latency_problem(requirement.p99_below, considered),
        _loss_problem(manifest.get("accounting")) if requirement.lossless else None) if problem]
    if problems:
        return Verdict(False, "; ".join(problems))
    worst = max(considered, key=lambda s: abs(_deviation(s)))
    return Verdict(True, f"within ±{requirement.rate_within:.0%} (worst {_deviation(worst):+.1%}"
                         f" at step {_label(worst)})"
                         + ("; balanced" if requirement.lossless else ""))


def _deviation(step: dict) -> float:
    target = step.get("target_rate") or 0.0
    return step["achieved_rate"] / target - 1.0 if target else 0.0


def _label(step: dict) -> str:
    return str(step.get("label") or step.get("step", "?"))


def _rate_problem(within: float, steps: list[dict]) -> str | None:
    out = [s for s in steps if abs(_deviation(s)) > within + 1e-9]
    if not out:
        return None
    worst = max(out, key=lambda s: abs(_deviation(s)))
    more = f" (and {len(out) - 1} more step{'s' if len(out) > 2 else ''})" if len(out) > 1 else ""
    return (f"step {_label(worst)}: achieved {worst['achieved_rate']:,.0f} of "
            f"{worst['target_rate']:,.0f} msg/s ({_deviation(worst):+.1%}, allowed "
            f"±{within:.0%}){more}")


def _latency_problem(below_s: float | None, steps: list[dict]) -> str | None:
    if below_s is None:
        return None
    out = [s for s in steps if s.get("p99_ms", 0.0) >= below_s * 1000]
    if not out:
        return None
    worst = max(out, key=lambda s: s["p99_ms"])
    return f"step {_label(worst)}: p99 {worst['p99_ms']:,.1f} ms (allowed below {below_s * 1000:g})"


def _loss_problem(accounting: dict | None) -> str | None:
    if not accounting:
        return "no accounting"
    if accounting.get("balanced") and not accounting.get("lost"):
        return None
    figures = ", ".join(f"{name} {accounting.get(name, '?')}"
                        for name in ("lost", "duplicates", "unexplained"))
    return f"accounting does not balance: {figures}"


# -- what is recorded ---------------------------------------------------------------------------

_STATUS = {"completed": "done", "interrupted": "interrupted", "aborted": "interrupted"}


@dataclass
class CellRecord:
    """A cell's state: ``done``, ``failed``, ``interrupted`` or ``pending``; its verdict."""

    cell: Cell
    status: str = "pending"
    passed: bool | None = None
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        """This record as ``campaign.json`` keeps it."""
        return {"id": self.cell.id, "scenario": str(self.cell.scenario),
                "overrides": self.cell.overrides, "repetition": self.cell.repetition,
                "status": self.status, "passed": self.passed, "reason": self.reason}


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """A cell directory's ``run.json``; None without a directory, ``{}`` if unreadable."""
    if not run_dir.exists():
        return None
    try:
        return json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def assess(record: CellRecord, run_dir: Path, requirement: Requirement) -> None:
    """Set a record's status and verdict from what its directory holds: ``completed`` is done
    (and judged), ``interrupted``/``aborted`` interrupted, anything else left behind failed."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        record.status, record.passed, record.reason = "pending", None, ""
        return
    outcome = manifest.get("outcome")
    record.status = _STATUS.get(outcome, "failed")
    verdict = judge(requirement, manifest)
    record.passed = verdict.passed if record.status == "done" else None
    record.reason = verdict.reason if outcome else "left no run.json"


def recall(root: Path, cells: list[Cell], requirement: Requirement) -> list[CellRecord]:
    """Every cell's record from its directory under ``root``: resuming runs the cells that
    are not ``done`` (a completed run), and skips the others."""
    records = [CellRecord(cell) for cell in cells]
    for record in records:
        assess(record, root / record.cell.id, requirement)
    return records


def set_aside(run_dir: Path) -> Path | None:
    """Rename a directory left by an unfinished attempt to ``<id>.attempt-<n>`` (the first
    free n) so the cell can run again; nothing recorded is deleted. None if there is none."""
    if not run_dir.exists():
        return None
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.attempt-{n}")).exists():
        n += 1
    run_dir.rename(target)
    return target


def strangers(root: Path, cells: list[Cell]) -> list[str]:
    """Directories in a campaign directory that belong to no cell of the campaign file (it
    changed since they were recorded); they are kept, and named so people know."""
    ids = {cell.id for cell in cells}
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and p.name.split(".attempt-")[0] not in ids)


def write_state(root: Path, campaign: Campaign, records: list[CellRecord],
                topology_up: TopologySpec | None) -> None:
    """(Re)write ``campaign.json`` atomically: the resolved campaign, every cell's status and
    verdict, and the topology the campaign has up (so a crashed campaign's is found)."""
    data = {"format_version": 1, "file": str(campaign.path.resolve()),
            "updated_at": datetime.now(timezone.utc).isoformat(),
            "campaign": campaign.spec.model_dump(mode="json"),
            "topology_up": topology_up.model_dump(mode="json") if topology_up else None,
            "cells": [{**record.as_json(), "topology": campaign.specs[record.cell.id][1].name}
                      for record in records]}
    tmp = root / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    os.replace(tmp, root / STATE_FILE)


def left_up(root: Path) -> TopologySpec | None:
    """The topology an earlier invocation of this campaign brought up and never tore down."""
    try:
        spec = json.loads((root / STATE_FILE).read_text()).get("topology_up")
    except (OSError, ValueError):
        return None
    return TopologySpec.model_validate(spec) if spec else None


def by_topology(cells: list[Cell], specs: dict[str, tuple[ScenarioSpec, TopologySpec]]
                ) -> list[tuple[TopologySpec, list[Cell]]]:
    """Cells grouped by their resolved topology (equal specs share one), groups in the order
    their first cell comes, cells in campaign order within a group."""
    groups: dict[str, tuple[TopologySpec, list[Cell]]] = {}
    for cell in cells:
        topology = specs[cell.id][1]
        groups.setdefault(topology.model_dump_json(), (topology, []))[1].append(cell)
    return list(groups.values())


def eta_s(planned_left: list[float], current_planned: float | None, current_elapsed: float,
          overheads: list[float]) -> float:
    """Seconds left: the planned load time of the cells still to run plus the mean measured
    overhead per cell (``DEFAULT_OVERHEAD_S`` until one is measured), less what the running
    cell has done."""
    overhead = fmean(overheads) if overheads else DEFAULT_OVERHEAD_S
    current = 0.0 if current_planned is None else \
        max(0.0, current_planned + overhead - current_elapsed)
    return current + sum(planned + overhead for planned in planned_left)


def recorded_overhead(manifest: dict[str, Any] | None, planned_s: float) -> float | None:
    """Seconds a recorded run took beyond its planned load (from ``started_at`` and
    ``ended_at`` in its run.json), so a resumed campaign's estimate starts from experience."""
    try:
        took = datetime.fromisoformat(manifest["ended_at"]) - \
            datetime.fromisoformat(manifest["started_at"])
    except (TypeError, KeyError, ValueError):
        return None
    return max(0.0, took.total_seconds() - planned_s)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


# -- the live view ------------------------------------------------------------------------------

class CampaignView:
    """Campaign progress: a rich live panel when stdout is a terminal, otherwise one line as
    each cell starts and one as it ends. The cells' own controllers draw nothing."""

    def __init__(self, campaign: Campaign, records: list[CellRecord],
                 console: Console | None = None):
        self.campaign = campaign
        self.records = records
        self.console = console or Console()
        self.fancy = self.console.is_terminal
        self.overheads: list[float] = []
        self.current: Cell | None = None
        self.current_state: ViewState | None = None
        self.started = time.monotonic()
        self.cell_started = 0.0
        self._live: Live | None = None

    def __enter__(self) -> CampaignView:
        if self.fancy:
            self._live = Live(get_renderable=self.render, console=self.console,
                              refresh_per_second=2)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.__exit__(*exc)
            self._live = None

    def say(self, message: str, style: str | None = None) -> None:
        """A line above the panel (or in the log), taken literally and never wrapped."""
        self.console.print(Text(message, style=style or ""), soft_wrap=True)

    def start(self, cell: Cell, state: ViewState | None) -> None:
        """A cell starts; ``state`` is its controller's view state, read as it runs."""
        self.current, self.current_state = cell, state
        self.cell_started = time.monotonic()
        if not self.fancy:
            self.say(f"{self.counts()}: {cell.id} starting "
                     f"({self.campaign.planned_s(cell):.0f} s planned)")

    def finish(self, record: CellRecord, slot_s: float) -> None:
        """A cell ended; ``slot_s`` is its wall time including topology work around it."""
        if record.status == "done":
            self.overheads.append(max(0.0, slot_s - self.campaign.planned_s(record.cell)))
        self.current, self.current_state = None, None
        verdict = {True: "pass", False: "fail", None: "-"}[record.passed]
        self.say(f"{record.cell.id}: {record.status}, {verdict}: {record.reason} "
                 f"[{_clock(slot_s)}]")

    def counts(self) -> str:
        """``1 done, 1 running, 2 left (0 failed), ~1m20s left``."""
        statuses = [r.status for r in self.records]
        running = 1 if self.current else 0
        left = [r.cell for r in self.records if r.status != "done"
                and r.cell is not self.current]
        elapsed = time.monotonic() - self.cell_started
        eta = eta_s([self.campaign.planned_s(c) for c in left],
                    self.campaign.planned_s(self.current) if self.current else None,
                    elapsed, self.overheads)
        return (f"{statuses.count('done')} done, {running} running, {len(left)} left "
                f"({statuses.count('failed')} failed), ~{_clock(eta)} left")

    def render(self) -> Group:
        """The panel: campaign, counts and time left, the running cell and its figures."""
        head = Text.assemble((f"surge campaign {self.campaign.spec.name}", "bold"),
                             f"  {self.counts()}",
                             f"  elapsed {_clock(time.monotonic() - self.started)}")
        if not self.current:
            return Group(head)
        cell = Text.assemble(("cell ", "bold"), (self.current.id, "cyan"),
                             f"  {time.monotonic() - self.cell_started:.0f}/"
                             f"{self.campaign.planned_s(self.current):.0f} s")
        figures = Text(plain_line(self.current_state) if self.current_state else "", style="dim")
        return Group(head, cell, figures)


# -- running ------------------------------------------------------------------------------------

@dataclass
class CampaignResult:
    """What one invocation of a campaign left: every cell's record and why it stopped."""

    root: Path
    records: list[CellRecord]
    stopped: str | None = None  # "interrupted" (Ctrl-C), "forced" (Ctrl-C twice), or None
    ran: list[str] = field(default_factory=list)  # ids of the cells run this time

    def with_status(self, status: str) -> list[CellRecord]:
        """The records in a given status."""
        return [r for r in self.records if r.status == status]


class CampaignRunner:
    """Runs the cells of a campaign that are not done yet, topology by topology.

    A first Ctrl-C ends the running cell cleanly (its controller handles it) or, between
    cells, lets the current topology work finish; then no further cell starts and the topology
    is torn down. A second Ctrl-C forces, and the topology is still torn down.
    """

    def __init__(self, campaign: Campaign, campaigns_dir: Path,
                 console: Console | None = None):
        self.campaign = campaign
        self.root = campaigns_dir / campaign.spec.name
        self.root.mkdir(parents=True, exist_ok=True)
        self.records = recall(self.root, campaign.cells, campaign.spec.requirement)
        self.by_id = {record.cell.id: record for record in self.records}
        self.view = CampaignView(campaign, self.records, console)
        self.view.overheads += [o for o in (recorded_overhead(
            read_manifest(self.root / r.cell.id), campaign.planned_s(r.cell))
            for r in self.records if r.status == "done") if o is not None]
        self.stop = threading.Event()
        self.result = CampaignResult(self.root, self.records)
        self.topology_up: TopologySpec | None = None

    def run(self) -> CampaignResult:
        """Run every cell not done yet; always leaves ``campaign.json`` up to date."""
        self._recall()
        self._clear_leftover()
        todo = [r.cell for r in self.records if r.status != "done"]
        if not todo:
            self.view.say(f"all {len(self.records)} cells are done; nothing to run")
        try:
            with self._ctrl_c(), self.view:
                for topology, cells in by_topology(todo, self.campaign.specs):
                    if self.stop.is_set():
                        break
                    self._run_group(topology, cells)
        except KeyboardInterrupt:
            self.result.stopped = "forced"
        finally:
            self._save()
        if self.stop.is_set() and not self.result.stopped:
            self.result.stopped = "interrupted"
        return self.result

    # -- before

    def _recall(self) -> None:
        for record in self.records:
            if record.status == "done":
                self._check_drift(record.cell)
        others = strangers(self.root, self.campaign.cells)
        if others:
            self.view.say(f"kept, but not cells of this campaign file: {', '.join(others)}",
                          "yellow")

    def _check_drift(self, cell: Cell) -> None:
        manifest = read_manifest(self.root / cell.id) or {}
        scenario, topology = self.campaign.specs[cell.id]
        changed = [name for name, spec in (("scenario", scenario), ("topology", topology))
                   if manifest.get(name) != json.loads(spec.model_dump_json())]
        if changed:
            self.view.say(f"{cell.id}: recorded with another {' and '.join(changed)} than the "
                          f"files give now; kept (move its directory away to run it again)",
                          "yellow")

    def _clear_leftover(self) -> None:
        leftover = left_up(self.root)
        if leftover:
            from topologies.rabbitmq.local import LocalRabbitMQ
            self.view.say(f"topology {leftover.name} was left up by an earlier run of this "
                          f"campaign; stopping it")
            self._down(LocalRabbitMQ(leftover))

    # -- topologies

    def _run_group(self, topology: TopologySpec, cells: list[Cell]) -> None:
        from topologies.rabbitmq.local import LocalRabbitMQ
        provisioner = LocalRabbitMQ(topology)
        self._refuse_foreign(provisioner, cells[0])
        try:
            for index, cell in enumerate(cells):
                started = time.monotonic()
                previous = self.by_id[cells[index - 1].id] if index else None
                try:
                    self._prepare(provisioner, previous)
                except SurgeError as error:
                    self._fail_all(cells[index:], f"topology {topology.name} did not come up: "
                                                  f"{error}")
                    return
                if self.stop.is_set():  # Ctrl-C while the topology was prepared
                    return
                self._run_cell(cell, self.by_id[cell.id])
                self.view.finish(self.by_id[cell.id], time.monotonic() - started)
                if self.stop.is_set():
                    return
        finally:
            self._down(provisioner)

    def _refuse_foreign(self, provisioner: LocalRabbitMQ, cell: Cell) -> None:
        if any(m.running or m.standby for m in provisioner.status()):
            topology_file = self.campaign.specs[cell.id][0].topology
            raise SurgeError(
                f"topology {provisioner.topology.name} is already up, not started by this "
                f"campaign; a campaign starts and stops each topology itself so that every cell "
                f"runs on the topology it names. Stop it (surge down {topology_file}) and run "
                f"the campaign again.")

    def _prepare(self, provisioner: LocalRabbitMQ, previous: CellRecord | None) -> None:
        """Bring the topology up for a group's first cell; before the others, restart it if
        the last cell failed or left it otherwise than a run starts (see :func:`unfresh`)."""
        if previous is None:
            self._up(provisioner)
            return
        reason = "the last cell failed" if previous.status == "failed" else unfresh(
            [m.index for m in provisioner.status() if m.running], provisioner.topology.start,
            read_manifest(self.root / previous.cell.id))
        if reason:
            self.view.say(f"restarting topology {provisioner.topology.name}: {reason}")
            self._down(provisioner)
            self._up(provisioner)

    def _fail_all(self, cells: list[Cell], reason: str) -> None:
        for cell in cells:
            record = self.by_id[cell.id]
            record.status, record.passed, record.reason = "failed", False, reason
            self.view.finish(record, 0.0)
        self._save()

    def _up(self, provisioner: LocalRabbitMQ) -> None:
        self.topology_up = provisioner.topology
        self._save()
        provisioner.up()

    def _down(self, provisioner: LocalRabbitMQ) -> None:
        with _shielded(self.view.say):
            provisioner.down()
        self.topology_up = None
        self._save()

    # -- cells

    def _run_cell(self, cell: Cell, record: CellRecord) -> None:
        from orchestrator.controller import Controller
        run_dir = self.root / cell.id
        kept = set_aside(run_dir)
        if kept:
            self.view.say(f"{cell.id}: the unfinished attempt is kept as {kept.name}")
        scenario, topology = self.campaign.specs[cell.id]
        error: Exception | None = None
        try:
            controller = Controller(scenario, topology, self.root, live=False,
                                    keep_topology=True, run_id=cell.id)
            self.view.start(cell, controller.state)
            controller.run()
        except Exception as exc:  # noqa: BLE001 - a broken cell is recorded; the rest go on
            error = exc
        finally:
            self.result.ran.append(cell.id)
            assess(record, run_dir, self.campaign.spec.requirement)
            if error is not None:
                record.status, record.passed = "failed", False
                record.reason = f"{type(error).__name__}: {error}"
                self.view.say(f"{cell.id} failed:\n" + "".join(traceback.format_exception(
                    type(error), error, error.__traceback__)[-3:]), "red")
            if record.status == "interrupted":
                self.stop.set()
            self._save()

    def _save(self) -> None:
        write_state(self.root, self.campaign, self.records, self.topology_up)

    @contextlib.contextmanager
    def _ctrl_c(self) -> Iterator[None]:
        """Between cells, a first Ctrl-C stops the campaign after what it is doing; a second
        raises KeyboardInterrupt. (During a cell its controller handles Ctrl-C itself.)"""
        def stop(signum: int, frame: object) -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            self.stop.set()
            self.view.say("stopping: no further cell starts; Ctrl-C again to force", "yellow")
        with _sigint(stop):
            yield


@contextlib.contextmanager
def _sigint(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for SIGINT meanwhile (only the main thread can set one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _shielded(say: Callable[[str, str], None]) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C cannot cut a teardown short (that would leave brokers running); it is answered."""
    return _sigint(lambda signum, frame: say("tearing the topology down; a moment", "yellow"))


def unfresh(serving: list[int], start: int, last_run: dict[str, Any] | None) -> str:
    """Why a topology is not as a new run expects it after the last cell, or "" if it is:
    other members serving than its first ``start`` (a scaling run grew it), or messages the
    last run left queued (its accounting, taken after its receivers stopped, says)."""
    if serving != list(range(start)):
        return f"members {serving} serve; a run starts with {list(range(start))}"
    accounting = (last_run or {}).get("accounting")
    if not accounting:
        return "the last run has no accounting to show its queue is empty"
    left = accounting.get("still_queued") or 0
    return f"the last run left {left:,} messages queued" if left else ""


# -- the end ------------------------------------------------------------------------------------

def cells_table(root: Path, records: list[CellRecord]) -> str:
    """One line per cell: status, pass/fail, the final step's target and achieved rate, and
    the accounting verdict; then why each cell that did not pass did not."""
    from results.compare import final_step
    from results.steptable import fixed_width
    lines = [["cell", "status", "requirement", "target msg/s", "achieved msg/s", "accounting"]]
    for record in records:
        figures = ["-", "-", "-"]
        if record.status == "done":
            with contextlib.suppress(SurgeError):
                _, row, verdict = final_step(root / record.cell.id)
                figures = [f"{row.target_rate:,.0f}", f"{row.achieved_rate:,.0f}", verdict]
        verdict = {True: "pass", False: "fail", None: "-"}[record.passed]
        lines.append([record.cell.id, record.status, verdict, *figures])
    why = [f"  {r.cell.id}: {r.reason}" for r in records if r.passed is False
           or r.status in ("failed", "interrupted")]
    return fixed_width(lines) + ("\n\nnot passed:\n" + "\n".join(why) if why else "")


def summary_text(campaign: Campaign, result: CampaignResult) -> str:
    """The campaign's summary: counts, the requirement, the cells, the comparison of the
    analysed runs (per combination too, with repetitions) and the ranking by cost."""
    from results.compare import ranking_text, statistics_text
    records = result.records
    done = result.with_status("done")
    passed = [r for r in done if r.passed]
    dirs = [result.root / r.cell.id for r in done]
    parts = [f"campaign {campaign.spec.name}: {len(records)} cells, {len(done)} done "
             f"({len(passed)} passed the requirement), {len(result.with_status('failed'))} "
             f"failed, {len(records) - len(done) - len(result.with_status('failed'))} not run"
             + (f"\n{campaign.spec.description}" if campaign.spec.description else ""),
             f"requirement: {campaign.spec.requirement.describe()}",
             cells_table(result.root, records)]
    if not any((d / "analysis" / "analysis.json").exists() for d in dirs):
        parts.append("no analysed runs, so no comparison or ranking: run the campaign without "
                     "--no-analyze, or surge analyze on its cells")
        return "\n\n".join(parts)
    parts.append("comparison at the final step, over every done cell:\n" + statistics_text(dirs))
    if campaign.spec.repetitions > 1:
        for combination, members in _by_combination(done).items():
            parts.append(f"{combination} over its repetitions:\n" + statistics_text(
                [result.root / r.cell.id for r in members]))
    parts.append("ranking by cost per 1,000 msg/s among the runs that passed the requirement:\n"
                 + ranking_text(dirs, passed=[result.root / r.cell.id for r in passed]))
    return "\n\n".join(parts)


def _by_combination(records: list[CellRecord]) -> dict[str, list[CellRecord]]:
    groups: dict[str, list[CellRecord]] = {}
    for record in records:
        groups.setdefault(record.cell.combination, []).append(record)
    return groups


def stopped_text(campaign: Campaign, result: CampaignResult, campaigns_dir: Path) -> str:
    """What an interrupted campaign did, and the command that resumes it."""
    done = [r.cell.id for r in result.with_status("done")]
    return (f"campaign {campaign.spec.name} stopped ({result.stopped}): {len(done)} of "
            f"{len(result.records)} cells done\n\n{cells_table(result.root, result.records)}\n\n"
            f"resume with: surge campaign {campaign.path} --campaigns-dir {campaigns_dir}\n"
            f"(done cells are kept; an unfinished cell's directory is renamed to "
            f"<cell id>.attempt-<n> and the cell runs again)")


def run_campaign(path: Path, campaigns_dir: Path, analyze: bool = True,
                 price_per_core_hour: float | None = None,
                 say: Callable[[str], None] = print) -> CampaignResult:
    """``surge campaign``: validate, run what is not done, then (unless stopped) analyse the
    done cells, print the summary and write it to ``<campaign dir>/summary.md``."""
    campaign = load_campaign(path)
    result = CampaignRunner(campaign, campaigns_dir).run()
    if result.stopped:
        say(stopped_text(campaign, result, campaigns_dir))
        return result
    done = [result.root / r.cell.id for r in result.with_status("done")]
    if analyze and done:
        from results.pipeline import DEFAULT_PRICE_PER_CORE_HOUR
        from results.pipeline import analyze as analyze_runs
        price = price_per_core_hour or campaign.spec.price_per_core_hour \
            or DEFAULT_PRICE_PER_CORE_HOUR
        say("analysing the done cells with Spark (--no-analyze skips this) ...")
        analyze_runs(done, price, say=say)
    text = summary_text(campaign, result)
    (result.root / SUMMARY_FILE).write_text(
        f"# Campaign {campaign.spec.name}\n\nFrom `{campaign.path}`.\n\n```text\n{text}\n```\n")
    say("\n" + text + f"\n\nsummary: {result.root / SUMMARY_FILE}")
    return result
