"""Agents on load hosts over SSH (document 000: senders on AppHost1, receivers on AppHost2).

Each agent is ``surge agent`` started through its own SSH channel with ``exec``, so its parent
is the session's sshd: when the controller goes away, the connection closes, the agent's
parent dies and the agent exits by itself, as local agents do. The per-run token travels on
the channel's standard input, never on a command line. The agent listens on the host's loopback
only; the controller talks to it over HTTP exactly as to a local one, through SSH port
forwarding, so its plain-HTTP control API and the token never cross the network outside SSH.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable

from orchestrator.agents.client import AgentHandle, read_hello
from orchestrator.agents.local import AGENT_START_TIMEOUT_S
from orchestrator.errors import AgentError
from orchestrator.specs.hosts import HostSpec
from topologies.ssh import RemoteProcess, SshSession

SHUTDOWN_WAIT_S = 10.0


def spawn_ssh_agents(session: SshSession, host: HostSpec, first_index: int, token: str,
                     max_lifetime_s: float) -> list[AgentHandle]:
    """Start ``host.agents`` agents on ``host``, numbered from ``first_index``."""
    handles = []
    try:
        for index in range(first_index, first_index + host.agents):
            handles.append(_spawn(session, host, index, token, max_lifetime_s))
    except AgentError:
        for handle in handles:
            handle.stop()
        raise
    return handles


def _spawn(session: SshSession, host: HostSpec, index: int, token: str,
           max_lifetime_s: float) -> AgentHandle:
    work = shlex.quote(host.work_dir)
    command = (f"read -r SURGE_AGENT_TOKEN; export SURGE_AGENT_TOKEN; mkdir -p {work}; "
               f"exec {shlex.quote(host.python)} -m orchestrator.cli agent "
               f"--host 127.0.0.1 --port 0 "
               f"--max-lifetime {int(max_lifetime_s)} 2>>{work}/agent-{index}.log")
    process = session.spawn(command, input_text=token + "\n")
    line = process.readline(AGENT_START_TIMEOUT_S)
    try:
        port = read_hello(line, f"agent {index} on {host.name} ({host.target})").port
    except AgentError as error:
        detail = process.stderr_tail() or f"see {host.work_dir}/agent-{index}.log on the host"
        process.close()
        raise AgentError(f"{error}; {detail}") from None
    handle = AgentHandle(index, "127.0.0.1", session.forward("127.0.0.1", port), token)
    handle.closer = _closer(handle, process)
    return handle


def _closer(handle: AgentHandle, process: RemoteProcess) -> Callable[[float], None]:
    def close(timeout_s: float) -> None:
        if process.alive:
            # already gone, or the host is unreachable: closing the channel ends it anyway
            with contextlib.suppress(AgentError):
                handle.shutdown()
            deadline = time.monotonic() + min(timeout_s, SHUTDOWN_WAIT_S)
            while process.alive and time.monotonic() < deadline:
                time.sleep(0.1)
        process.close()
    return close


def clock_offset(agent: AgentHandle, samples: int = 7) -> tuple[float, float]:
    """The agent host's clock minus ours, in ms, and its uncertainty (half the round trip),
    from the quickest of a few ``GET /clock`` exchanges (as NTP picks its best sample)."""
    best = None
    for _ in range(samples):
        before = time.time_ns()
        remote = agent.clock().ns
        after = time.time_ns()
        if best is None or after - before < best[1] - best[0]:
            best = (before, after, remote)
    before, after, remote = best
    return (remote - (before + after) / 2) / 1e6, (after - before) / 2e6
