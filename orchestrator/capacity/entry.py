"""``surge capacity`` below the command line: a scenario file's capacity searches, their answer
as text, the analysis of their runs and the document ``--json`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.capacity.runner import search_all
from orchestrator.run.lines import Lines
from orchestrator.specs.capacity import CapacitySpec
from orchestrator.specs.loader import load_scenario
from results.capacity import as_markdown
from results.passes import analyze_if_installed


@dataclass(frozen=True)
class SearchOptions:
    """How ``surge capacity`` searches (its options, see ``surge capacity --help``); None or
    empty: the scenario's capacity section decides."""

    members: list[int] | None = None
    repeat: int | None = None
    project: list[int] | None = None
    target: float | None = None
    runs_dir: Path = Path("runs")
    live: bool = True
    analyze: bool = True
    web: str | None = None


@dataclass(frozen=True)
class SearchReport:
    """A finished ``surge capacity``: whether every search ran to its end, and its ``--json``
    document."""

    complete: bool
    document: dict[str, Any] = field(default_factory=dict)


def search_file(scenario: Path, overrides: list[str], options: SearchOptions, lines: Lines
                ) -> SearchReport:
    """Search the scenario file's topology for the highest rate within its SLO, per member
    count (``options`` over its capacity section); the answer goes to ``lines``."""
    spec, topology = load_scenario(scenario, overrides, lines.warn)
    section = spec.capacity or CapacitySpec()
    changes = {k: v for k, v in (("members", options.members), ("repeat", options.repeat)) if v}
    spec = spec.model_copy(update={"capacity": section.model_copy(update=changes)})
    result = search_all(spec, topology, str(scenario), options.runs_dir, lines.say,
                        live=options.live, project=options.project, target=options.target,
                        web=options.web)
    lines.say(f"\ncapacity: {result.directory}")
    lines.say(as_markdown(result.document, spec.slo.model_dump()))
    if options.analyze and result.searches:
        analyze_if_installed([Path(s.run_dir) for s in result.searches], lines.say,
                             lines.caution)
    return SearchReport(result.complete, {"directory": str(result.directory),
                                          **result.document, "complete": result.complete})
