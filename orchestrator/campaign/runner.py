"""Running a campaign (see :mod:`orchestrator.specs.campaign` for the file): each cell is one
run, with ``--set`` style overrides, recorded as ``<campaign dir>/<cell id>/``. Running the
file again resumes: completed cells are kept, the others run (an unfinished attempt's directory
is renamed aside first, never deleted). Cells run grouped by topology; each topology is brought
up before its cells and torn down after them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.campaign.ranking import capacity_text
from orchestrator.campaign.records import CellRecord
from orchestrator.campaign.requirement import Requirement, judge
from orchestrator.campaign.view import CampaignView, recorded_overhead
from orchestrator.errors import FileError, SurgeError
from orchestrator.retry import retrying
from orchestrator.run.controller import on_stop_signals
from orchestrator.run.ports import check_metrics_port
from orchestrator.specs.campaign import Campaign, Cell, load_campaign
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from orchestrator.web.feed import Board
from orchestrator.web.server import serving
from results.rundir.jsonfile import read_object, replace_text
from results.rundir.manifest import MANIFEST_FILE, RunManifest, read_manifest
from topologies import lease

if TYPE_CHECKING:
    from topologies.base import Provisioner

STATE_FILE = "campaign.json"
SUMMARY_FILE = "summary.md"
DEFAULT_OVERHEAD_S = 20.0  # per cell until one is measured: agents, drain, accounting
_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_ID = 150


# -- what is recorded ---------------------------------------------------------------------------

_STATUS = {"completed": "done", "interrupted": "interrupted", "aborted": "interrupted"}


def recorded(run_dir: Path) -> RunManifest | None:
    """A cell directory's ``run.json``, or None if there is none it can be read from."""
    try:
        return read_manifest(run_dir)
    except FileError:
        return None


def assess(record: CellRecord, run_dir: Path, requirement: Requirement) -> None:
    """Set a record's status and verdict from what its directory holds: ``completed`` is done
    (and judged), ``interrupted``/``aborted`` interrupted, anything else left behind failed
    (a run.json that cannot be read too, with the reason why)."""
    if not run_dir.exists():
        record.status, record.passed, record.reason = "pending", None, ""
        return
    record.status, record.passed = "failed", None
    if not (run_dir / MANIFEST_FILE).exists():
        record.reason = "left no run.json"
        return
    try:
        manifest = read_manifest(run_dir)
    except FileError as error:
        record.reason = str(error)
        return
    record.status = _STATUS.get(manifest.outcome or "", "failed")
    verdict = judge(requirement, manifest)
    record.passed = verdict.passed if record.status == "done" else None
    record.reason = verdict.reason


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
    replace_text(root / STATE_FILE, json.dumps(data, indent=2, ensure_ascii=False))


def left_up(root: Path) -> TopologySpec | None:
    """The topology an earlier invocation of this campaign brought up and never tore down."""
    path = root / STATE_FILE
    spec = read_object(path).get("topology_up") if path.exists() else None
    try:
        return TopologySpec.model_validate(spec) if spec else None
    except ValueError:  # a pydantic ValidationError
        raise FileError(f"{path}: topology_up is not a valid topology; a damaged campaign "
                        "state?") from None


def by_topology(cells: list[Cell], specs: dict[str, tuple[ScenarioSpec, TopologySpec]]
                ) -> list[tuple[TopologySpec, list[Cell]]]:
    """Cells grouped by their resolved topology (equal specs share one), groups in the order
    their first cell comes, cells in campaign order within a group."""
    groups: dict[str, tuple[TopologySpec, list[Cell]]] = {}
    for cell in cells:
        topology = specs[cell.id][1]
        groups.setdefault(topology.model_dump_json(), (topology, []))[1].append(cell)
    return list(groups.values())


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
                 console: Console | None = None, metrics_port: int | None = None,
                 web: str | None = None):
        self.campaign = campaign
        self.web = web  # HOST:PORT of the campaign's live page (None: none)
        self.metrics_port = metrics_port  # each cell's controller's /metrics (None: default)
        self.root = campaigns_dir / campaign.spec.name
        self.root.mkdir(parents=True, exist_ok=True)
        self.records = recall(self.root, campaign.cells, campaign.spec.requirement)
        self.by_id = {record.cell.id: record for record in self.records}
        self.view = CampaignView(campaign, self.records, console)
        self.view.overheads += [o for o in (recorded_overhead(
            recorded(self.root / r.cell.id), campaign.planned_s(r.cell))
            for r in self.records if r.status == "done") if o is not None]
        self.stop = threading.Event()
        self.result = CampaignResult(self.root, self.records)
        self.topology_up: TopologySpec | None = None
        self.board = Board(campaign=self.view.page)

    def run(self) -> CampaignResult:
        """Run every cell not done yet; always leaves ``campaign.json`` up to date."""
        self._recall()
        self._clear_leftover()
        todo = [r.cell for r in self.records if r.status != "done"]
        if not todo:
            self.view.say(f"all {len(self.records)} cells are done; nothing to run")
        try:
            with self._ctrl_c(), self.view, serving(self.board, self.web, self.view.say):
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
        manifest = recorded(self.root / cell.id)
        scenario, topology = self.campaign.specs[cell.id]
        changed = [name for name, spec in (("scenario", scenario), ("topology", topology))
                   if manifest is None
                   or getattr(manifest, name) != json.loads(spec.model_dump_json())]
        if changed:
            self.view.say(f"{cell.id}: recorded with another {' and '.join(changed)} than the "
                          f"files give now; kept (move its directory away to run it again)",
                          "yellow")

    def _clear_leftover(self) -> None:
        leftover = left_up(self.root)
        if leftover:
            from topologies.factory import provisioner_for
            self.view.say(f"topology {leftover.name} was left up by an earlier run of this "
                          f"campaign; stopping it")
            self._down(provisioner_for(leftover))

    # -- topologies

    def _run_group(self, topology: TopologySpec, cells: list[Cell]) -> None:
        from topologies.factory import provisioner_for
        provisioner = provisioner_for(topology)
        with lease.holding(topology.name, "campaign", self.campaign.spec.name,
                           str(self.root)) as held:
            if held.previous:
                self.view.say(lease.settle_previous(held.previous), "yellow")
            self._refuse_foreign(provisioner, cells[0])
            self._run_cells(provisioner, topology, cells)

    def _run_cells(self, provisioner: Provisioner, topology: TopologySpec,
                   cells: list[Cell]) -> None:
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

    def _refuse_foreign(self, provisioner: Provisioner, cell: Cell) -> None:
        if any(m.running or m.standby for m in provisioner.status()):
            topology_file = self.campaign.specs[cell.id][0].topology
            raise SurgeError(
                f"topology {provisioner.topology.name} is already up, not started by this "
                f"campaign; a campaign starts and stops each topology itself so that every cell "
                f"runs on the topology it names. Stop it (surge down {topology_file}) and run "
                f"the campaign again.")

    def _prepare(self, provisioner: Provisioner, previous: CellRecord | None) -> None:
        """Bring the topology up for a group's first cell; before the others, restart it if
        the last cell failed or left it otherwise than a run starts (see :func:`unfresh`)."""
        if previous is None:
            self._up(provisioner)
            return
        reason = "the last cell failed" if previous.status == "failed" else unfresh(
            [m.index for m in provisioner.status() if m.running], provisioner.topology.start,
            recorded(self.root / previous.cell.id))
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

    def _up(self, provisioner: Provisioner) -> None:
        self.topology_up = provisioner.topology
        self._save()
        lease.record_members(provisioner.topology.name, {
            "kind": "campaign", "id": self.campaign.spec.name, "directory": str(self.root),
            "pid": os.getpid()})
        retrying(provisioner.up, stop=self.stop, said=lambda attempt, error: self.view.say(
            f"bringing {provisioner.topology.name} up failed ({error}); trying again"))

    def _down(self, provisioner: Provisioner) -> None:
        with _shielded(self.view.say):
            provisioner.down()
        lease.record_members(provisioner.topology.name, None)
        self.topology_up = None
        self._save()

    # -- cells

    def _run_cell(self, cell: Cell, record: CellRecord) -> None:
        from orchestrator.capacity.runner import schedule_for
        from orchestrator.run.controller import Controller, stop_on_signals
        run_dir = self.root / cell.id
        kept = set_aside(run_dir)
        if kept:
            self.view.say(f"{cell.id}: the unfinished attempt is kept as {kept.name}")
        scenario, topology = self.campaign.specs[cell.id]
        error: Exception | None = None
        controller = None
        try:
            schedule = schedule_for(scenario, topology.start, scenario.capacity.start_rate) \
                if scenario.capacity else None
            controller = Controller(scenario, topology, self.root, live=False,
                                    keep_topology=True, run_id=cell.id,
                                    metrics_port=self.metrics_port, schedule=schedule,
                                    board=self.board)
            self.view.start(cell, controller.state)
            with stop_on_signals(controller):
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
            # a Ctrl-C as the cell finished (after its run.json said completed) still counts
            if record.status == "interrupted" or (
                    controller is not None and controller.stop_requested.is_set()):
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
        with on_stop_signals(stop):
            yield


def _shielded(say: Callable[[str, str], None]) -> contextlib.AbstractContextManager[None]:
    """A stop signal cannot cut a teardown short (that would leave brokers running); it is
    answered."""
    return on_stop_signals(lambda signum, frame: say("tearing the topology down; a moment",
                                                     "yellow"))


def unfresh(serving: list[int], start: int, last_run: RunManifest | None) -> str:
    """Why a topology is not as a new run expects it after the last cell, or "" if it is:
    other members serving than its first ``start`` (a scaling run grew it), or messages the
    last run left queued (its accounting, taken after its receivers stopped, says)."""
    if serving != list(range(start)):
        return f"members {serving} serve; a run starts with {list(range(start))}"
    accounting = last_run.accounting if last_run else None
    if accounting is None:
        return "the last run has no accounting to show its queue is empty"
    left = accounting.still_queued or 0
    return f"the last run left {left:,} messages queued" if left else ""


# -- the end ------------------------------------------------------------------------------------

def cells_table(root: Path, records: list[CellRecord]) -> str:
    """One line per cell: status, pass/fail, the final step's target and achieved rate, and
    the accounting verdict; then why each cell that did not pass did not."""
    from results.compare import final_step
    from results.rundir.steps import fixed_width
    lines = [["cell", "status", "requirement", "target msg/s", "achieved msg/s", "accounting"]]
    for record in records:
        figures = ["-", "-", "-"]
        if record.status == "done":
            with contextlib.suppress(SurgeError):
                _, row, verdict = final_step(root / record.cell.id)
                figures = [f"{row.target_rate:,.0f}", "-" if row.achieved_rate is None
                           else f"{row.achieved_rate:,.0f}", verdict]
        verdict = {True: "pass", False: "fail", None: "-"}[record.passed]
        lines.append([record.cell.id, record.status, verdict, *figures])
    why = [f"  {r.cell.id}: {r.reason}" for r in records if r.passed is False
           or r.status in ("failed", "interrupted")]
    return fixed_width(lines) + ("\n\nnot passed:\n" + "\n".join(why) if why else "")


def tables_text(campaign: Campaign, dirs: list[Path]) -> list[str]:
    """The campaign's document tables over the done cells' runs."""
    from results.documents import TABLES, document_table
    return [f"{TABLES[name].title}:\n{document_table(name, dirs).text()}"
            for name in campaign.spec.tables] if dirs else []


def summary_text(campaign: Campaign, result: CampaignResult) -> str:
    """The campaign's summary: counts, the requirement, the cells, the comparison of the
    analysed runs (per combination too, with repetitions) and the ranking by cost."""
    from results.compare import ranking_text, statistics_text
    from results.lake import analysed
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
    searched = capacity_text(campaign, [(r.cell, m) for r in result.with_status("done")
                                        if (m := recorded(result.root / r.cell.id))])
    if searched:
        parts.append(searched)
    parts.extend(tables_text(campaign, dirs))
    if not analysed(dirs):
        parts.append("no analysed runs, so no comparison or ranking: run the campaign without "
                     "--no-analyze, or surge analyze on its cells")
        return "\n\n".join(parts)
    parts.append("comparison at the final step, over every done cell:\n" + statistics_text(dirs))
    if campaign.spec.repetitions > 1:
        for combination, members in _by_combination(done).items():
            parts.append(f"{combination} over its repetitions:\n" + statistics_text(
                [result.root / r.cell.id for r in members]))
    parts.append("ranking by cost per 1,000 msg/s among the runs that passed the requirement "
                 "(cost unknown: not ranked):\n"
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
                 say: Callable[[str], None] = print,
                 metrics_port: int | None = None, web: str | None = None,
                 overrides: list[str] | None = None) -> CampaignResult:
    """``surge campaign``: validate (with the command's ``overrides`` for every cell), run
    what is not done, then (unless stopped) analyse the done cells, print the summary and
    write it to ``<campaign dir>/summary.md``.
    ``metrics_port`` is each cell's controller's ``/metrics`` port (see
    :class:`~orchestrator.run.exposition.ControllerMetrics`); ``web`` the campaign's live
    page (``HOST:PORT``, None: none)."""
    check_metrics_port(metrics_port)
    campaign = load_campaign(path, overrides)
    result = CampaignRunner(campaign, campaigns_dir, metrics_port=metrics_port, web=web).run()
    if result.stopped:
        say(stopped_text(campaign, result, campaigns_dir))
        return result
    done = [result.root / r.cell.id for r in result.with_status("done")]
    if analyze and done:
        from results.installed import analysis_missing
        from results.pipeline import DEFAULT_PRICE_PER_CORE_HOUR
        from results.pipeline import analyze as analyze_runs
        price = price_per_core_hour or campaign.spec.price_per_core_hour \
            or DEFAULT_PRICE_PER_CORE_HOUR
        if why := analysis_missing():
            say(f"analysis skipped: {why}")
        else:
            say("analysing the done cells with Spark (--no-analyze skips this) ...")
            analyze_runs(done, price, say=say)
    text = summary_text(campaign, result)
    (result.root / SUMMARY_FILE).write_text(
        f"# Campaign {campaign.spec.name}\n\nFrom `{campaign.path}`.\n\n```text\n{text}\n```\n")
    say("\n" + text + f"\n\nsummary: {result.root / SUMMARY_FILE}")
    return result
