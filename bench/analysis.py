"""Analysis speed: one synthetic 1-hour run of 400 workers at 1 Hz, and an incremental
``surge analyze`` over 100 already-analysed runs plus one new one.

Targets on this machine: under 60 s for the hour-long run, under 30 s for the incremental pass.

    .venv/bin/python bench/analysis.py [--runs 100]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results.pipeline import analyze  # noqa: E402
from results.spark import session  # noqa: E402
from results.synthetic import write_run  # noqa: E402


def quiet(_line: str) -> None:
    """Drop per-run progress lines."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="already-analysed runs")
    args = parser.parse_args()
    started = time.monotonic()
    session()
    print(f"Spark session start: {time.monotonic() - started:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.monotonic()
        hour = root / "hour" / "run-1h-400-workers"
        write_run(hour, seconds=3600, phase_s=600, second_member_at=1801, agents=8,
                  samples=400, parts_every=5)
        print(f"wrote a 1 h run of 400 workers (3,600 ticks, 8 agents) in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        summary = analyze([hour], say=quiet)
        print(f"analysed the 1 h run in {summary.seconds:.1f} s (target: under 60 s)", flush=True)

        many = root / "many"
        template = many / "template"
        write_run(template, seconds=60, phase_s=20)
        for i in range(args.runs):
            shutil.copytree(template, many / f"run-{i:03d}")
        shutil.rmtree(template)
        first = analyze(sorted(many.iterdir()), say=quiet)
        print(f"first pass over {args.runs} runs: {first.seconds:.1f} s", flush=True)
        write_run(many / "run-new", seconds=60, phase_s=20, seed=7)
        incremental = analyze(sorted(p for p in many.iterdir() if p.is_dir()), say=quiet)
        print(f"incremental pass ({len(incremental.skipped)} up to date, "
              f"{len(incremental.analysed)} new): {incremental.seconds:.1f} s "
              f"(target: under 30 s)", flush=True)


if __name__ == "__main__":
    main()
