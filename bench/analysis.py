"""Analysis speed with the results lake: a first pass over 100 and over 1,000 synthetic runs, an
incremental pass with 1 new run among 1,000 analysed (in a fresh process: JVM start included),
and a 1-hour run of 400 workers alone, as written (720 parts per table) and compacted. The
incremental pass is measured with the class-data archive a machine has after its first analysis
(written first if missing) and without it.

Targets on this 2-core machine: 100 runs <= 60 s, 1,000 runs <= 300 s, incremental <= 15 s,
1 h x 400 workers <= 20 s.

    .venv/bin/python bench/analysis.py [--runs 100,1000] [--skip-hour]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results.pipeline import analyze  # noqa: E402
from results.rundir.manifest import read_manifest  # noqa: E402
from results.spark import class_archive, session  # noqa: E402
from results.synthetic import write_run  # noqa: E402

INCREMENTAL = """
import json, sys, time
from pathlib import Path
started = time.monotonic()
from results.catalog import run_dirs
from results.pipeline import analyze
summary = analyze(run_dirs(Path(sys.argv[1])), say=lambda line: None)
print(json.dumps({"seconds": time.monotonic() - started, "analysed": len(summary.analysed),
                  "up_to_date": len(summary.skipped), "failed": len(summary.failed)}))
"""


def quiet(_line: str) -> None:
    """Drop per-run progress lines."""


def many(root: Path, count: int) -> list[Path]:
    """``count`` copies of a 60 s synthetic run of two phases (compacted, as a closed run's)."""
    template = root / "template"
    write_run(template, seconds=60, phase_s=20)
    dirs = []
    for i in range(count):
        dirs.append(root / f"run-{i:04d}")
        shutil.copytree(template, dirs[-1])
    shutil.rmtree(template)
    return dirs


def fresh_pass(root: Path, **environment: str) -> dict:
    """What :data:`INCREMENTAL` says of ``root``, analysed in a fresh process."""
    done = subprocess.run([sys.executable, "-c", INCREMENTAL, str(root)],
                          capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, **environment})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="100,1000", help="first-pass sizes, comma-separated")
    parser.add_argument("--skip-hour", action="store_true", help="leave the 1 h run out")
    args = parser.parse_args()
    sizes = [int(n) for n in args.runs.split(",")]
    if class_archive().writing:
        with tempfile.TemporaryDirectory() as tmp:
            write_run(Path(tmp) / "run", seconds=60, phase_s=20)
            started = time.monotonic()
            fresh_pass(Path(tmp))
            print(f"class-data archive written (once per installation): "
                  f"{time.monotonic() - started:.1f} s", flush=True)
    started = time.monotonic()
    session()
    print(f"Spark session start: {time.monotonic() - started:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for size in sizes:
            dirs = many(root / f"first-{size}", size)
            first = analyze(dirs, say=quiet)
            assert len(first.analysed) == size, first.failed
            print(f"first pass over {size:,} runs: {first.seconds:.1f} s "
                  f"({first.seconds / size * 1000:.0f} ms per run)", flush=True)
        largest = root / f"first-{max(sizes)}"
        for seed, archive in ((7, "with the class-data archive"), (8, "without it")):
            write_run(largest / f"run-new-{seed}", seconds=60, phase_s=20, seed=seed)
            incremental = fresh_pass(largest, **({} if seed == 7 else
                                                 {"SURGE_SPARK_CLASS_CACHE": "off"}))
            print(f"incremental pass, a fresh process {archive} "
                  f"({incremental['up_to_date']:,} up to date, {incremental['analysed']} new): "
                  f"{incremental['seconds']:.1f} s (target: 15 s, JVM start included)", flush=True)
        if args.skip_hour:
            return
        for compacted in (False, True):
            hour = root / f"hour-{compacted}" / "run-1h-400-workers"
            write_run(hour, seconds=3600, phase_s=600, second_member_at=1801, agents=8,
                      samples=400, parts_every=5, compacted=compacted)
            if not compacted:  # as written by a run that did not close: not compacted here
                read_manifest(hour).replace(outcome="running").write(hour)
            summary = analyze([hour], say=quiet)
            assert summary.analysed, summary.failed
            print(f"a 1 h run of 400 workers, {'compacted' if compacted else '720 parts per table'}"
                  f": {summary.seconds:.1f} s (target: 20 s)", flush=True)


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("analysis"):
        main()
