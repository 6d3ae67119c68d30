"""The MQI emulator for tests (NOT IBM MQ): IBM's real ``ibmmq`` package over our own
``libmqm_r.so`` (libmqm.c) talking to emulated queue managers (qmgr.py). See README.md.

Helpers: :func:`build_library` compiles the library, :func:`load_ibmmq` imports ``ibmmq``
with it preloaded (once per process), :class:`EmulatedQmgr` runs one queue manager process,
:func:`admin` sends it MQSC-like commands. Fixtures using them: tests/mqemu/fixtures.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from tests.mqemu.slices import remove_all as remove_slices

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "libmqm.c"
QMGR = HERE / "qmgr.py"
STANDINS = HERE.parent / "integration" / "mq_standin_bin"  # crtmqm, strmqm, ... driving qmgr.py
PORTS = range(*(int(end) + i for i, end in enumerate(
    os.environ.get("MQEMU_PORTS", "9400-9499").split("-"))))
"""This emulator's listeners: 9400-9499, or ``MQEMU_PORTS=FIRST-LAST`` (sessions running side
by side each take their own range)."""
START_TIMEOUT_S = 10.0
_loaded: dict[str, object] = {}


def build_library(directory: Path) -> Path:
    """Compile libmqm.c into ``directory``/libmqm_r.so (SONAME libmqm_r.so) with gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FileNotFoundError("gcc is not installed (make deps installs it)")
    target = directory / "libmqm_r.so"
    subprocess.run([gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-Wl,-soname,libmqm_r.so", "-pthread", "-o", str(target), str(SOURCE)],
                   check=True, capture_output=True, text=True, timeout=120)
    return target


def load_ibmmq(library: Path) -> ModuleType:
    """IBM's ``ibmmq`` bound to ``library``: preloaded with ctypes before the first import (the
    extension finds ``libmqm_r.so`` by SONAME among loaded libraries). A process can bind
    ``ibmmq`` to one library only; asking for another is an error."""
    first = _loaded.setdefault("library", str(library))
    if first != str(library):
        raise RuntimeError(f"ibmmq is already bound to {first}, not {library}")
    if "ibmmq" in sys.modules and "handle" not in _loaded:
        raise RuntimeError("ibmmq was imported before the emulator library was loaded")
    os.environ.setdefault("MQIPY_NOOTEL", "1")  # no OpenTelemetry hooks (extra MQI verbs)
    _loaded.setdefault("handle", ctypes.CDLL(str(library)))
    return importlib.import_module("ibmmq")


def free_port(taken: set[int]) -> int:
    """A loopback port of :data:`PORTS` nobody listens on."""
    for port in PORTS:
        if port in taken:
            continue
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


class EmulatedQmgr:
    """One emulated queue manager process (``qmgr.py``), started at construction; with
    ``peers``, announced in that directory to the others (clusters: tests/mqemu/peers.py)."""

    def __init__(self, name: str, port: int, data: Path, user: str = "", password: str = "",
                 mqsc: list[str] = (), peers: Path | None = None, options: tuple[str, ...] = ()):
        self.name, self.port, self.data = name, port, data
        data.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(QMGR), "--name", name, "--port", str(port),
                   "--data", str(data)]
        if peers is not None:
            command += ["--peers", str(peers)]
        command += options  # qmgr.py's other options, e.g. --uniform CLUSTER
        if user:
            command += ["--user", user, "--password", password]
        if mqsc:
            script = data / "start.mqsc"
            script.write_text("\n".join(mqsc) + "\n", encoding="utf-8")
            command += ["--mqsc", str(script)]
        self.log = open(data / "qmgr.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in stop
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        line = ""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not line.startswith("READY") and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line and self.process.poll() is not None:
                break
        if not line.startswith("READY"):
            self.stop()
            raise RuntimeError(f"queue manager {name} did not start on port {port}: "
                               f"{(data / 'qmgr.log').read_text()[-2000:]}")

    @property
    def conname(self) -> str:
        """Its CONNAME, ``127.0.0.1(port)``."""
        return f"127.0.0.1({self.port})"

    def admin(self, *commands: str) -> list[list[str]]:
        """Run MQSC-like commands; each one's output lines."""
        return admin(self.port, *commands)

    def stop(self) -> None:
        """Stop the process by its PID (SIGTERM, then SIGKILL) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process.stdout:
            self.process.stdout.close()
        self.log.close()


def admin(port: int, *commands: str, timeout_s: float = 10.0,
          host: str = "127.0.0.1") -> list[list[str]]:
    """Send MQSC-like ``commands`` to the queue manager on ``host:port``; each one's output
    lines."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(b"MQSC")
        stream = sock.makefile("rw", encoding="utf-8", newline="\n")
        results = []
        for command in commands:
            stream.write(command.replace("\n", " ") + "\n")
            stream.flush()
            lines = []
            for line in stream:
                if line.rstrip("\n") == ".":
                    break
                lines.append(line.rstrip("\n"))
            results.append(lines)
        return results


def install_standins(directory: Path, environment: dict[str, str] | None = None,
                     exporter_offset: int | None = None) -> Path:
    """MQ's control commands as stand-ins (tests/integration/mq_standin_bin) copied into
    ``directory``, set to start this emulator with this Python and ``environment`` (e.g.
    ``MQEMU_REBALANCE_INTERVAL_S``); ``directory``. With ``exporter_offset``, ``strmqm`` also
    starts IBM's exporter stand-in (exporter.py) for each queue manager on its listener port
    plus the offset."""
    shutil.copytree(STANDINS, directory)
    environment = dict(environment or {})
    if exporter_offset is not None:
        environment["MQEMU_EXPORTER_OFFSET"] = str(exporter_offset)
    exports = "".join(f"export {key}={shlex.quote(value)}\n"
                      for key, value in environment.items())
    (directory / "mqemu.env").write_text(f"MQEMU={shlex.quote(str(HERE))}\n"
                                         f"MQEMU_PYTHON={shlex.quote(sys.executable)}\n"
                                         + exports)
    return directory


def end_all(standins: Path, timeout_s: float = 10.0) -> list[str]:
    """Stop (by PID) every emulated queue manager (and exporter) the stand-ins in ``standins``
    started and left running, and remove the cgroups of their slices; the queue managers'
    names."""
    ended = []
    for record in sorted((standins / "state").glob("*.json")):
        entry = json.loads(record.read_text())
        if entry.get("pid") and Path(f"/proc/{entry['pid']}").exists():
            ended.append(record.stem)
        stop_pid(entry.get("exporter_pid"), "exporter.py", timeout_s)
        stop_pid(entry.get("pid"), "qmgr.py", timeout_s)
    remove_slices(standins / "state")
    return ended


def stop_pid(pid: int | None, program: str, timeout_s: float = 5.0) -> None:
    """Stop a process of ours by its PID if it still runs ``program`` (a PID recorded earlier
    may have been reused): SIGTERM, then SIGKILL after ``timeout_s``."""
    try:
        if not pid or program not in Path(f"/proc/{pid}/cmdline").read_text():
            return
    except OSError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
