"""Agents on this machine: one ``python -m drivers.agent`` subprocess on loopback that forks an
agent per token from itself once it has loaded its modules."""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from drivers.protocol import log_name
from orchestrator.agents.client import AgentHandle, read_hello
from orchestrator.errors import AgentError

AGENT_START_TIMEOUT_S = 30.0
REAP_WAIT_S = 5.0  # an exited copy is reaped by its parent or init within this, or let be


def _stop_local(handle: AgentHandle, timeout_s: float) -> None:
    """Ask a local agent to shut down; terminate, then kill, its process if it lingers (alone:
    the agents forked from one process share its process group)."""
    process = handle.process
    if process.poll() is not None:
        return
    try:
        handle.shutdown()
        process.wait(timeout_s)
    except (AgentError, subprocess.TimeoutExpired):
        _signal(process, signal.SIGTERM)
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL)
            process.wait()


def spawn_local_agents(count: int, log_dir: Path, max_lifetime_s: float,
                       hide: frozenset[str] = frozenset(), broker: str | None = None
                       ) -> list[AgentHandle]:
    """Start ``count`` agents as subprocesses on loopback, each with its own token, in this
    process's environment less the variables in ``hide`` (secrets the topology names: agents
    get credentials in their control messages); see :class:`LocalStart`."""
    return LocalStart(count, log_dir, max_lifetime_s, hide, broker).wait()


class LocalStart:
    """Local agents whose process is started and whose first lines are still to be read.

    One process starts Python and imports the agent's modules and the broker's driver, then
    forks the other agents from itself (:func:`drivers.agent.serve`): a machine's agents cost
    one interpreter's start, which they make while the run prepares the rest, rather than one
    each, all at once on the same cores as the controller. The agents then have
    :data:`AGENT_START_TIMEOUT_S` from the moment they are waited for to say their lines;
    when one fails, every agent started is stopped before the error is raised. ``broker``: the
    driver they load before forking."""

    def __init__(self, count: int, log_dir: Path, max_lifetime_s: float,
                 hide: frozenset[str] = frozenset(), broker: str | None = None):
        self.log_dir = log_dir
        # the directories made for the logs, deepest first (``abandon`` removes them if empty)
        self.made = [d for d in (log_dir, *log_dir.parents) if not d.exists()]
        log_dir.mkdir(parents=True, exist_ok=True)
        self.tokens = [secrets.token_urlsafe(24) for _ in range(count)]
        self.process: subprocess.Popen | None = _start(self.tokens, log_dir, max_lifetime_s,
                                                       hide, broker)

    def wait(self) -> list[AgentHandle]:
        """Every agent's handle, once each has said its first line."""
        process, handles = self.process, []
        assert process is not None, "the agents were waited for or abandoned already"
        lines = _Lines(process)
        try:
            for index, token in enumerate(self.tokens):
                handles.append(_await(index, token, process, lines, self.log_dir))
        except BaseException:
            for handle in handles:
                handle.stop()
            self.abandon()
            raise
        self.process = None
        return handles

    def abandon(self, forget: bool = False) -> None:
        """Kill the agents started and not waited for (they have done nothing yet); ``forget``:
        remove their logs too where empty, and the directories made for them if that leaves
        them empty (a run that stopped before its agents started leaves no trace of them)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # the first agent and its copies
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None
            if forget:
                for index in range(len(self.tokens)):
                    log = self.log_dir / log_name(index)
                    with contextlib.suppress(OSError):
                        if log.stat().st_size == 0:
                            log.unlink()
        if forget:
            for directory in self.made or [self.log_dir]:
                with contextlib.suppress(OSError):
                    directory.rmdir()


class CopyProcess:
    """A local agent forked from the first, and so not this process's child: what a run asks of
    its ``subprocess.Popen`` (``pid``, :meth:`poll`, :meth:`wait`), through a pidfd. Its exit
    status is its parent's to read: ``returncode`` is -1 once it has exited."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:  # gone already
            self.returncode = -1

    def poll(self) -> int | None:
        """``returncode``, once it has exited."""
        return self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait until it has exited (``subprocess.TimeoutExpired`` after ``timeout``)."""
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout or 0.0)
        return code

    def _ended(self, timeout: float | None) -> int | None:
        if self.returncode is None and select.select([self._fd], [], [], timeout)[0]:
            self.returncode = -1
            os.close(self._fd)
            self._fd = None
            _until_reaped(self.pid, REAP_WAIT_S)
        return self.returncode

    def __del__(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)


def _until_reaped(pid: int, timeout_s: float) -> None:
    """Wait, at most ``timeout_s``, until exited process ``pid`` is reaped (by the first agent,
    its parent, or by init once the first agent is gone): an agent stopped is no longer there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def _start(tokens: list[str], log_dir: Path, max_lifetime_s: float, hide: frozenset[str],
           broker: str | None) -> subprocess.Popen:
    """The process of the agents with ``tokens`` (``python -m drivers.agent``: the agent
    without the command line's own start-up), started."""
    env = {k: v for k, v in os.environ.items() if k not in hide}
    env["SURGE_AGENT_TOKEN"] = ",".join(tokens)
    with open(log_dir / log_name(0), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "drivers.agent", "--host", "127.0.0.1", "--port", "0",
             "--max-lifetime", str(int(max_lifetime_s)), "--log-dir", str(log_dir),
             *(["--broker", broker] if broker else [])],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)


def _await(index: int, token: str, process: subprocess.Popen, lines: _Lines, log_dir: Path
           ) -> AgentHandle:
    """The handle of agent ``index``, once ``process`` has said its line (the first agent's
    process is ``process`` itself, a copy's a :class:`CopyProcess`); :class:`AgentError` if
    it says none in time or another."""
    line = lines.next(AGENT_START_TIMEOUT_S)
    hello = read_hello(line, f"agent {index} (log: {log_dir / log_name(index)})")
    handle = AgentHandle(index, "127.0.0.1", hello.port, token,
                         process if index == 0 else CopyProcess(hello.pid))
    handle.closer = lambda timeout_s: _stop_local(handle, timeout_s)
    return handle


class _Lines:
    """The lines of a process's output, read straight off its pipe: a buffered reader would
    take the next agents' lines with the first, where waiting for the pipe cannot see them."""

    def __init__(self, process: subprocess.Popen):
        self.fd = process.stdout.fileno()
        self.pending = b""

    def next(self, timeout_s: float) -> str:
        """The next line (with its newline), or what came before the end of the output, or
        "" if nothing more came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return ""
            chunk = os.read(self.fd, 4096)
            if not chunk:
                line, self.pending = self.pending, b""
                return line.decode(errors="replace")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode(errors="replace") + "\n"


def _signal(process: subprocess.Popen | CopyProcess, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signum)
