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
                       hide: frozenset[str] = frozenset()) -> list[AgentHandle]:
    """Start ``count`` agents as subprocesses on loopback, each with its own token, in this
    process's environment less the variables in ``hide`` (secrets the topology names: agents
    get credentials in their control messages).

    Every process is started before the first is waited for: each spends a fraction of a
    second starting Python and importing its modules, which they do side by side. Each then has
    :data:`AGENT_START_TIMEOUT_S` from the moment it is waited for to say its first line; when
    one fails, every agent started is stopped before the error is raised."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started: list[tuple[int, str, subprocess.Popen]] = []
    handles: list[AgentHandle] = []
    try:
        for index in range(count):
            started.append(_start(index, log_dir, max_lifetime_s, hide))
        for index, token, process in started:
            handles.append(_await(index, token, process, log_dir))
    except BaseException:
        for handle in handles:
            handle.stop()
        for _, _, process in started[len(handles):]:
            _signal(process, signal.SIGKILL)
            process.wait()
        raise
    return handles


def _start(index: int, log_dir: Path, max_lifetime_s: float, hide: frozenset[str]
           ) -> tuple[int, str, subprocess.Popen]:
    """Agent ``index``'s process, started (``python -m drivers.agent``: the agent without the
    command line's own start-up); its token."""
    token = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k not in hide}
    env["SURGE_AGENT_TOKEN"] = token
    with open(log_dir / f"agent-{index}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "drivers.agent", "--host", "127.0.0.1", "--port", "0",
             "--max-lifetime", str(int(max_lifetime_s))],
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
