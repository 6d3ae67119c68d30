"""pytest fixtures of the MQI emulator, registered for the whole suite by tests/conftest.py
(``pytest_plugins``); nothing is built or started unless a test asks for them.

- ``mqemu_library`` (session): libmqm.c compiled once into a temporary directory; skipped
  only when gcc is missing.
- ``emulated_ibmmq`` (session): IBM's ``ibmmq`` imported with that library preloaded; the same
  module for the whole session (it can be bound once per process).
- ``qmgrs`` (function): ``qmgrs.start("QM1", user=..., mqsc=[...])`` starts emulated queue
  managers on free ports of 9400-9499; all are stopped by PID when the test ends, failed or not.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.mqemu import EmulatedQmgr, build_library, free_port, load_ibmmq

START_ATTEMPTS = 5


@pytest.fixture(scope="session")
def mqemu_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the MQI emulator's libmqm_r.so cannot be built")
    return build_library(tmp_path_factory.mktemp("mqemu"))


@pytest.fixture(scope="session")
def emulated_ibmmq(mqemu_library: Path) -> ModuleType:
    return load_ibmmq(mqemu_library)


class Qmgrs:
    """Starts emulated queue managers for one test and stops them all."""

    def __init__(self, root: Path):
        self.root = root
        self.running: list[EmulatedQmgr] = []

    def start(self, name: str, user: str = "", password: str = "",
              mqsc: list[str] = (), options: tuple[str, ...] = ()) -> EmulatedQmgr:
        """Queue manager ``name`` on a free port, with ``mqsc`` commands run at start and
        qmgr.py's other ``options`` (``("--uniform", "UC01")``); another port when someone
        else binds the one probed free first (up to 5 tries); the queue managers of one test
        see each other (``peers``)."""
        tried: set[int] = {q.port for q in self.running}
        for attempt in range(5):
            port = free_port(tried)
            tried.add(port)
            try:
                qmgr = EmulatedQmgr(name, port, self.root / f"{name}-{port}", user, password,
                                    mqsc, self.root / "peers", options)
                break
            except RuntimeError as error:
                if "Address already in use" not in str(error) or attempt == 4:
                    raise
        self.running.append(qmgr)
        return qmgr

    def stop_all(self) -> None:
        for qmgr in self.running:
            qmgr.stop()
        self.running.clear()


@pytest.fixture
def qmgrs(tmp_path: Path) -> Iterator[Qmgrs]:
    started = Qmgrs(tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
