"""runmqsc for an emulated queue manager (tests only; NOT IBM MQ): MQSC commands from stdin,
one per line, sent to the queue manager listening on ``--port``; each command's output printed.

``python tests/mqemu/runmqsc.py --port 9401 < commands.mqsc``. Exit status as runmqsc's: 0 all
commands ran, 10 one or more failed (their output starts with an AMQ...E message), 20 the queue
manager is not available. ``END`` stops the queue manager (what endmqm does), so the
tests/integration/mq_standin_bin scripts can drive emulated queue managers through this.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.mqemu import admin  # noqa: E402  (run as a script)

ERROR = re.compile(r"^AMQ\d{4}E")


def main(argv: list[str] | None = None) -> int:
    """Run stdin's commands against the queue manager on ``--port``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="the queue manager's port")
    parser.add_argument("--host", default="127.0.0.1", help="the loopback address it is on")
    args = parser.parse_args(argv)
    commands = [line.strip() for line in sys.stdin
                if line.strip() and not line.lstrip().startswith("*")]
    try:
        results = admin(args.port, *commands, host=args.host)
    except OSError:
        print("AMQ8146E: IBM MQ queue manager not available.")
        return 20
    failed = 0
    for number, (command, lines) in enumerate(zip(commands, results, strict=True), 1):
        print(f"     {number} : {command}")
        for line in lines:
            print(line)
        failed += any(ERROR.match(line) for line in lines)
    return 10 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
