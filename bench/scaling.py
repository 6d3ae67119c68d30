"""Reaction time per scale-out, from real run directories of a scaling scenario.

Threshold first crossed -> decision -> member serving -> achieved rate back within 5% of target
(3 seconds in a row); the target is a median under 20 s. Scaling efficiency has its own
benchmark, ``bench/efficiency.py``.

    .venv/bin/python bench/scaling.py runs/<run>...      # analyse runs
    .venv/bin/python bench/scaling.py --run              # run the uniform scaling scenario first
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results import timeline  # noqa: E402
from results.rundir.manifest import read_manifest  # noqa: E402
from results.rundir.tables import read_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def reaction_times(run_dir: Path) -> list[dict]:
    """One entry per scale-out of a run directory (see :func:`results.timeline.reaction_times`)."""
    return timeline.reaction_times(read_manifest(run_dir), timeline.read_events(run_dir),
                                   read_table(run_dir, "ticks").to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--run", action="store_true", help="run the uniform scaling scenario")
    args = parser.parse_args()
    runs = list(args.runs)
    if args.run:
        subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "--no-live",
                        str(ROOT / "scenarios/uniform-cluster-scaling.yaml")], check=False)
        runs.append(sorted((ROOT / "runs").glob("*-uniform-cluster-scaling"))[-1])
    every = []
    for run_dir in runs:
        for entry in reaction_times(run_dir):
            every.append(entry)
            print(f"{run_dir.name}: crossed->decision {entry['to_decision_s']:.0f} s, "
                  f"decision->serving {entry['to_serving_s']:.1f} s, serving->recovered "
                  f"{_s(entry['to_recovered_s'])}, total {_s(entry['total_s'])}")
    totals = [e["total_s"] for e in every if e["total_s"] is not None]
    if totals:
        print(f"reaction time over {len(totals)} scale-outs: median {statistics.median(totals):.1f}"
              f" s, max {max(totals):.1f} s (target: median under 20 s)")


def _s(value: float | None) -> str:
    return "not within the step" if value is None else f"{value:.1f} s"


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("scaling"):
        main()
