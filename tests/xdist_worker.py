"""Which pytest-xdist worker this process is (``make test JOBS=2``): what keeps the resources of
workers running side by side apart."""

import os


def worker_index() -> int:
    """This worker's number (0 when the suite runs in one process)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def worker_count() -> int:
    """How many workers run the suite (1 when it runs in one process)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def worker_share(ports: range) -> range:
    """This worker's part of ``ports``, apart from every other worker's."""
    width = len(ports) // worker_count()
    first = ports.start + width * worker_index()
    return range(first, first + width)
