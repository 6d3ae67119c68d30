"""Agents on this machine: ``surge agent`` subprocesses on loopback, one token each."""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import subprocess
import sys
from pathlib import Path

from orchestrator.agents.client import AgentHandle, read_hello
from orchestrator.errors import AgentError

AGENT_START_TIMEOUT_S = 30.0


def _stop_local(handle: AgentHandle, timeout_s: float) -> None:
    """Ask a local agent to shut down; terminate, then kill, its process group if it lingers."""
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
    """Local agents whose processes are started and whose first lines are still to be read.

    Every process is started before the first is waited for: each spends a fraction of a
    second starting Python and importing its modules, which they do side by side, and while
    the run prepares the rest. Each then has :data:`AGENT_START_TIMEOUT_S` from the moment it
    is waited for to say its first line; when one fails, every agent started is stopped before
    the error is raised. ``broker``: the driver each loads once it has said that line."""

    def __init__(self, count: int, log_dir: Path, max_lifetime_s: float,
                 hide: frozenset[str] = frozenset(), broker: str | None = None):
        self.log_dir = log_dir
        self.started: list[tuple[int, str, subprocess.Popen]] = []
        # the directories made for the logs, deepest first (``abandon`` removes them if empty)
        self.made = [d for d in (log_dir, *log_dir.parents) if not d.exists()]
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for index in range(count):
                self.started.append(_start(index, log_dir, max_lifetime_s, hide, broker))
        except BaseException:
            self.abandon()
            raise

    def wait(self) -> list[AgentHandle]:
        """Every agent's handle, once each has said its first line."""
        handles: list[AgentHandle] = []
        try:
            for index, token, process in self.started:
                handles.append(_await(index, token, process, self.log_dir))
        except BaseException:
            for handle in handles:
                handle.stop()
            del self.started[:len(handles)]
            self.abandon()
            raise
        self.started = []
        return handles

    def abandon(self, forget: bool = False) -> None:
        """Kill the agents started and not waited for (they have done nothing yet); ``forget``:
        remove their logs too where empty, and the directories made for them if that leaves
        them empty (a run that stopped before its agents started leaves no trace of them)."""
        for index, _, process in self.started:
            _signal(process, signal.SIGKILL)
            process.wait()
            if forget:
                log = self.log_dir / f"agent-{index}.log"
                with contextlib.suppress(OSError):
                    if log.stat().st_size == 0:
                        log.unlink()
        if forget:
            for directory in self.made or [self.log_dir]:
                with contextlib.suppress(OSError):
                    directory.rmdir()
        self.started = []


def _start(index: int, log_dir: Path, max_lifetime_s: float, hide: frozenset[str],
           broker: str | None) -> tuple[int, str, subprocess.Popen]:
    """Agent ``index``'s process, started (``python -m drivers.agent``: the agent without the
    command line's own start-up); its token."""
    token = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k not in hide}
    env["SURGE_AGENT_TOKEN"] = token
    with open(log_dir / f"agent-{index}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "drivers.agent", "--host", "127.0.0.1", "--port", "0",
             "--max-lifetime", str(int(max_lifetime_s)),
             *(["--broker", broker] if broker else [])],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    return index, token, process


def _await(index: int, token: str, process: subprocess.Popen, log_dir: Path) -> AgentHandle:
    """The handle of the agent that ``process`` started, once it has said its first line;
    :class:`AgentError` (the process killed) if it says none in time or another."""
    line = _read_line(process, AGENT_START_TIMEOUT_S)
    try:
        hello = read_hello(line, f"agent {index} (log: {log_dir / f'agent-{index}.log'})")
    except AgentError:
        _signal(process, signal.SIGKILL)
        process.wait()
        raise
    handle = AgentHandle(index, "127.0.0.1", hello.port, token, process)
    handle.closer = lambda timeout_s: _stop_local(handle, timeout_s)
    return handle


def _read_line(process: subprocess.Popen, timeout_s: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
    return process.stdout.readline().decode(errors="replace")


def _signal(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
