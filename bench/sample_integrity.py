"""Count impossible samples in run directories (any format version).

    .venv/bin/python bench/sample_integrity.py runs/<run> [runs/<run> ...]

Prints, per run, the counts of member CPU above quota, ticks receiving more than was queued
plus sent, and frozen queue-depth runs (rules in ``results/integrity.py``), then tick lateness
and depth age where the run recorded them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results.integrity import suspect_samples  # noqa: E402
from results.rundir.manifest import read_manifest  # noqa: E402
from results.rundir.tables import read_table  # noqa: E402


def main(paths: list[str]) -> None:
    """Print the counts for each run directory."""
    for path in map(Path, paths):
        ticks = sorted(read_table(path, "ticks").to_pylist(), key=lambda r: r["elapsed_s"])
        members = read_table(path, "members").to_pylist()
        found = suspect_samples(ticks, members)
        manifest = read_manifest(path)
        print(f"{path.name}: format {manifest.format_version}, {len(ticks)} ticks, "
              f"{len(members)} member rows")
        print(f"  {found.line()}")
        for example in found.examples[:5]:
            print(f"    e.g. {example}")
        sampling = manifest.sampling
        if sampling and sampling.tick_lateness_s.count:
            late, age = sampling.tick_lateness_s, sampling.depth_age_s
            print(f"  tick lateness p50 {late.p50 * 1000:.1f} ms, p99 {late.p99 * 1000:.1f}"
                  f" ms, max {late.max * 1000:.1f} ms; {sampling.ticks_skipped} skipped")
            if age.count:
                print(f"  depth age p50 {age.p50 * 1000:.0f} ms, max {age.max * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a run directory")
    runs = parser.parse_args().runs
    if missing := [run for run in runs if not (Path(run) / "run.json").is_file()]:
        parser.error(f"not a run directory (no run.json): {', '.join(missing)}")
    from bench.record import recorded
    with recorded("sample_integrity"):
        main(runs)
