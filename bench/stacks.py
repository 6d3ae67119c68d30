"""Where the CPU went: the top functions of py-spy's collapsed stacks (``--format raw``).

    .venv/bin/python bench/stacks.py PROFILE.txt [...] [--top 25] [--idle]

Prints, per function (``name (file:line)`` as py-spy writes it, line numbers dropped), the
share of samples where it is on top of the stack (self) and anywhere on it (inclusive). Samples
whose innermost frame is a ``select``/``poll``/``wait``/``sleep`` are counted as idle and left
out unless ``--idle``: a ``--nonblocking`` py-spy cannot tell a thread waiting in ``poll(2)``
from a running one, so the event loop's waits (and the poll calls' own, small, cost) go.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

IDLE = re.compile(r"^(\w+\.)?(select|poll|epoll|wait|_wait_for_tstate_lock|sleep) \(")
_LINE = re.compile(r":\d+\)$")


def frames(stack: str) -> list[str]:
    """The frames of one collapsed stack, outermost first, without line numbers."""
    return [_LINE.sub(")", frame) for frame in stack.split(";")]


def tally(paths: list[Path], idle: bool) -> tuple[Counter, Counter, int]:
    """(self samples per function, inclusive samples per function, samples counted)."""
    own, inclusive, total = Counter(), Counter(), 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            names = frames(stack)
            if not idle and IDLE.match(names[-1]):
                continue
            n = int(count)
            total += n
            own[names[-1]] += n
            for name in set(names):
                inclusive[name] += n
    return own, inclusive, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--idle", action="store_true", help="count threads waiting, too")
    args = parser.parse_args()
    own, inclusive, total = tally(args.profiles, args.idle)
    if not total:
        raise SystemExit("no samples")
    print(f"{total:,} samples{'' if args.idle else ' (busy)'}")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"\n{title:>9} %  function")
        for name, n in counter.most_common(args.top):
            print(f"{100 * n / total:11.1f}  {name}")


if __name__ == "__main__":
    main()
