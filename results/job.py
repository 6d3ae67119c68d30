"""``surge analyze`` as a file for ``spark-submit``: analyse new or changed runs under a root.

    spark-submit --master spark://spark-master:7077 \
        "$(python -c 'import results.job; print(results.job.__file__)')" /data/runs [--force]

surge must be installed where the driver runs (the file imports it). The master comes from
``spark-submit``; the job is the same as ``surge analyze``'s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from results.catalog import run_dirs
from results.pipeline import DEFAULT_PRICE_PER_CORE_HOUR, analyze


def main() -> int:
    """Analyse the runs under the given root; exit status 1 if any run failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--price-per-core-hour", type=float, default=DEFAULT_PRICE_PER_CORE_HOUR)
    parser.add_argument("--include-drain", action="store_true",
                        help="count the drain (before the first step and after the last) in "
                             "the cost")
    args = parser.parse_args()
    summary = analyze(run_dirs(args.runs_dir), args.price_per_core_hour, args.force,
                      include_drain=args.include_drain)
    print(f"analysed {len(summary.analysed)}, up to date {len(summary.skipped)}, "
          f"failed {len(summary.failed)} in {summary.seconds:.1f} s")
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
