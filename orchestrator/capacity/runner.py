"""``surge capacity``: one search per member count (and repeat), each a run of its own under one
capacity directory, then the answer (:mod:`results.capacity`) written beside them."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from drivers.accounting import Reconciliation
from orchestrator.capacity.plan import SearchSchedule
from orchestrator.capacity.search import SearchSettings
from orchestrator.capacity.slo import p99_ms
from orchestrator.errors import Problem, SpecError
from orchestrator.run.controller import Controller, stop_on_signals
from orchestrator.specs.capacity import HOURS_PER_MONTH, CapacitySpec
from orchestrator.specs.faults import ConditionSpec
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from orchestrator.specs.units import format_span
from orchestrator.web.feed import Board
from orchestrator.web.server import serving
from results import capacity
from results.rundir.runid import new_run_id
from topologies import lease

Say = Callable[[str], None]


@dataclass(frozen=True)
class CapacityResult:
    """Where the answer went, the searches, and whether every search ran to its end."""

    directory: Path
    searches: list[capacity.Search]
    document: dict
    complete: bool


def check(topology: TopologySpec, spec: CapacitySpec, source: str) -> list[int]:
    """The member counts to search (the scenario's own limits are checked when it loads)."""
    counts = spec.members or list(range(1, topology.members + 1))
    if max(counts) > topology.members:
        raise SpecError(source, [Problem("capacity.members", f"{max(counts)} members asked "
                                                             f"for; topology {topology.name} "
                                                             f"has {topology.members}")])
    problems = spec.member_problems(counts)
    if problems:
        raise SpecError(source, [Problem(".".join(map(str, ("capacity", *loc))), message)
                                 for loc, message in problems])
    return counts


def schedule_for(scenario: ScenarioSpec, members: int, start: float,
                 condition: ConditionSpec | None = None) -> SearchSchedule:
    """The search of ``scenario``'s capacity section at ``members``, from ``start`` msg/s,
    under ``condition`` (default its first)."""
    spec = scenario.capacity or CapacitySpec()
    return SearchSchedule(
        members, SearchSettings(start=start, growth=spec.growth, precision=spec.precision,
                                max_probes=spec.max_probes),
        spec, scenario.slo, scenario.workload.senders, scenario.measure.settle,
        condition or spec.searched_under[0])


def search_all(scenario: ScenarioSpec, topology: TopologySpec, source: str, runs_dir: Path,
               say: Say, live: bool = True, project: list[int] | None = None,
               target: float | None = None, web: str | None = None) -> CapacityResult:
    """Search every member count of the scenario's capacity section (in order, ``repeat``
    times) under each of its conditions in turn, each starting from 90 % of the rate the
    count below it sustained under that condition; ``web``
    (``HOST:PORT``) serves a live page that shows each search's run in turn."""
    spec = scenario.capacity or CapacitySpec()
    counts = check(topology, spec, source)
    directory = runs_dir / new_run_id(f"capacity-{scenario.name}")
    searches: list[capacity.Search] = []
    board = Board()
    with lease.holding(topology.name, "capacity", directory.name, str(directory)) as held:
        directory.mkdir(parents=True)
        if held.previous:
            say(lease.settle_previous(held.previous))
        with serving(board, web, say):
            complete = _search_counts(scenario, topology, spec, counts, directory, searches,
                                      board, say, live)
    document = capacity.answer(searches, target or spec.target,
                               project or [2 * max(counts)])
    document["price"] = {"hours_per_month": HOURS_PER_MONTH, **spec.price.model_dump(
        include={"instance_types", "instance", "storage_classes", "storage"})}
    slo = scenario.slo.model_dump()
    capacity.write(directory, document, slo)
    return CapacityResult(directory, searches, document, complete)


def _search_counts(scenario: ScenarioSpec, topology: TopologySpec, spec: CapacitySpec,
                   counts: list[int], directory: Path, searches: list[capacity.Search],
                   board: Board, say: Say, live: bool) -> bool:
    """The searches, count by count and repeat by repeat, added to ``searches``; whether every
    one ended by itself. Each is said as it starts (which of how many, the time left at the
    pace of those done) and as it ends."""
    conditions = spec.searched_under
    total, took = len(conditions) * spec.repeat * len(counts), []
    for condition in conditions:
        for repeat in range(spec.repeat):
            for members in counts:
                below = [s.rate for s in searches if s.members < members and s.rate
                         and s.condition == condition.name]
                start = max(below[-1] * 0.9, 1.0) if below else spec.start_rate
                say(f"capacity: search {len(took) + 1} of {total}: {members} member(s), "
                    f"{condition.name}, repeat {repeat + 1} of {spec.repeat}, first probe "
                    f"{start:,.0f} msg/s" + time_left(took, total - len(took)))
                began = time.monotonic()
                found, finished = _search(scenario, topology, spec, members, start, directory,
                                          board, live, condition)
                took.append(time.monotonic() - began)
                searches.append(found)
                say(f"capacity: {members} member(s), {condition.name}: "
                    + (f"{found.rate:,.0f} msg/s" if found.rate else "no rate held")
                    + f" ({found.why}; {len(found.probes)} probes in "
                      f"{format_span(took[-1])}; accounting: {found.accounting})")
                if not finished:
                    return False
    return True


def time_left(took: list[float], left: int) -> str:
    """``"; ~12m30s left"`` at the mean pace of the searches that ``took`` so long, for the
    ``left`` still to run ("" before one has been timed: probe counts vary too much to
    guess)."""
    if not took:
        return ""
    return f"; ~{format_span(statistics.fmean(took) * left)} left"


def _search(scenario: ScenarioSpec, topology: TopologySpec, spec: CapacitySpec, members: int,
            start: float, directory: Path, board: Board, live: bool, condition: ConditionSpec
            ) -> tuple[capacity.Search, bool]:
    """One search at ``members`` under ``condition``: a run of its own; whether it ended by
    itself."""
    sized = topology.model_copy(update={"start": members} | (
        {"members": members} if topology.placement == "local" else {}))
    schedule = schedule_for(scenario, members, start, condition)
    named = "" if condition.name == "ideal" else f"-{condition.name}"
    controller = Controller(scenario, sized, directory, live=live, schedule=schedule,
                            metrics_port=0, board=board,
                            run_id=new_run_id(f"{scenario.name}-{members}m{named}"))
    with stop_on_signals(controller):
        result = controller.run()
    record = schedule.record()
    row = schedule.row_found()
    generator = _generator_cores(controller.history.generator_cpu, row) if row else None
    quota = members * topology.cpu_per_member if topology.cpu_per_member else None
    found = capacity.Search(
        members=members, run_dir=str(result.run_dir), rate=record.rate,
        converged=record.converged, why=record.why,
        p50_ms=row.p50_ms if row else None, p99_ms=p99_ms(row) if row else None,
        broker_cores=sum(row.cpu_percent.values()) / 100 if row and row.cpu_percent else None,
        quota_cores=quota, generator_cores=generator,
        monthly=spec.price.monthly(members, topology.cpu_per_member),
        probes=[p.model_dump(mode="json") for p in record.probes],
        condition=condition.name, accounting=accounting_line(controller.accounting))
    return found, result.outcome == "completed" and schedule.found is not None


def accounting_line(done: Reconciliation | None) -> str:
    """How exactly a search's run accounted for its messages: ``exact: ...`` where every
    message sent is received, still queued or lost (lost and duplicate deliveries said), else
    ``inexact: `` and where the books do not add up."""
    if done is None:
        return "inexact: the run ended before its messages were accounted for"
    if done.unknown is not None or done.still_queued is None or done.unexplained:
        return f"inexact: {done.explain()}"
    extra = [f"{done.lost:,} lost" if done.lost else "",
             f"{done.duplicates:,} duplicate deliver{'y' if done.duplicates == 1 else 'ies'}"
             if done.duplicates else ""]
    return ", ".join([f"exact: {done.sent:,} sent, {done.received:,} received, "
                      f"{done.still_queued:,} queued"] + [e for e in extra if e])


def _generator_cores(generator_cpu: list[tuple[float, float]], row) -> float | None:
    """The load generator's cores over ``row``'s window: the mean of its seconds' summed agent
    CPU."""
    inside = [percent for elapsed, percent in generator_cpu if row.start_s < elapsed <= row.end_s]
    return statistics.fmean(inside) / 100 if inside else None
