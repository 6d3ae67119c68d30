"""The controller's side of agents: spawning local ones and calling their control API."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import AgentError

AGENT_START_TIMEOUT_S = 30.0


@dataclass
class AgentHandle:
    """A running agent: where it listens, its token, and (for local ones) its process."""

    index: int
    host: str
    port: int
    token: str
    process: subprocess.Popen | None = None
    closer: Callable[[float], None] | None = None  # how a remote agent is stopped

    @property
    def url(self) -> str:
        """Base URL of the agent's HTTP API."""
        return f"http://{self.host}:{self.port}"

    def call(self, method: str, path: str, body: Any = None, timeout_s: float = 30.0) -> Any:
        """One authenticated control call; raises ``AgentError`` naming the agent on failure."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise AgentError(f"agent {self.index} {method} {path}: HTTP {error.code} {detail}") \
                from None
        except (urllib.error.URLError, OSError) as error:
            raise AgentError(f"agent {self.index} {method} {path}: {error}") from None

    def stop(self, timeout_s: float = 20.0) -> None:
        """Ask the agent to shut down; terminate, then kill, its process if it lingers (a
        remote agent: its ``closer`` does the same over its own channel)."""
        if self.process is None:
            if self.closer is not None:
                self.closer(timeout_s)
            return
        if self.process.poll() is not None:
            return
        try:
            self.call("POST", "/shutdown", {}, timeout_s=5.0)
            self.process.wait(timeout_s)
        except (AgentError, subprocess.TimeoutExpired):
            _signal(self.process, signal.SIGTERM)
            try:
                self.process.wait(5.0)
            except subprocess.TimeoutExpired:
                _signal(self.process, signal.SIGKILL)
                self.process.wait()


def spawn_local_agents(count: int, log_dir: Path, max_lifetime_s: float) -> list[AgentHandle]:
    """Start ``count`` agents as subprocesses on loopback, each with its own token."""
    handles: list[AgentHandle] = []
    try:
        for index in range(count):
            handles.append(_spawn(index, log_dir, max_lifetime_s))
    except AgentError:
        for handle in handles:
            handle.stop()
        raise
    return handles


def _spawn(index: int, log_dir: Path, max_lifetime_s: float) -> AgentHandle:
    token = secrets.token_urlsafe(24)
    env = dict(os.environ, SURGE_AGENT_TOKEN=token)
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"agent-{index}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "agent", "--host", "127.0.0.1",
             "--port", "0", "--max-lifetime", str(int(max_lifetime_s))],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    line = _read_line(process, AGENT_START_TIMEOUT_S)
    try:
        hello = json.loads(line)
    except ValueError:
        _signal(process, signal.SIGKILL)
        raise AgentError(f"agent {index} did not start; see {log_dir / f'agent-{index}.log'}") \
            from None
    return AgentHandle(index, "127.0.0.1", int(hello["port"]), token, process)


def _read_line(process: subprocess.Popen, timeout_s: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
    return process.stdout.readline().decode(errors="replace")


def _signal(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
