"""The controller's side of the agent protocol (:mod:`drivers.protocol`): one typed method per
call, and the handle of a running agent, however it was started."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from drivers import protocol
from orchestrator.errors import AgentError

M = TypeVar("M")


class AgentClient(Protocol):
    """What the run loop, the scaler and accounting ask of an agent. :class:`AgentHandle`
    speaks it over HTTP; tests give the loop agents that live in memory."""

    index: int
    host: str

    def hello(self) -> protocol.Hello:
        """Where the agent listens and which protocol it speaks."""

    def configure(self, config: protocol.Configure) -> protocol.Configured:
        """Create the agent's driver and workers."""

    def set_rate(self, rate: protocol.Rate) -> protocol.RateApplied:
        """Change every sender's rate and how many publish."""

    def set_consumer_delay(self, delay: protocol.ConsumerDelay) -> protocol.Done:
        """Set each receiver's processing time per message."""

    def move(self, move: protocol.Move) -> protocol.Moved:
        """Move workers to another member."""

    def snapshot(self, timeout_s: float = 30.0) -> protocol.Snapshot:
        """Counters now and the latency since the previous snapshot."""

    def accounting(self) -> protocol.Accounting:
        """What each producer sent and which sequence numbers this agent received."""

    def clock(self) -> protocol.Clock:
        """The agent host's wall clock."""

    def stop_senders(self) -> protocol.Done:
        """Stop publishing (waits for confirms)."""

    def stop_receivers(self) -> protocol.Done:
        """Stop consuming."""

    def stop(self, timeout_s: float = 20.0) -> None:
        """Shut the agent down and release what it holds."""


@dataclass
class AgentHandle:
    """A running agent reached over HTTP: where it listens, its token, and how it is stopped
    (its local process, or a ``closer`` for one on a load host or in a pod)."""

    index: int
    host: str
    port: int
    token: str
    process: Any = None  # subprocess.Popen of a local agent
    closer: Callable[[float], None] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """Base URL of the agent's HTTP API."""
        return f"http://{self.host}:{self.port}"

    def hello(self) -> protocol.Hello:
        """Where the agent listens and which protocol it speaks (``GET /hello``)."""
        return self._call("GET", "/hello", None, protocol.Hello, 5.0)

    def configure(self, config: protocol.Configure) -> protocol.Configured:
        """``POST /configure``."""
        return self._call("POST", "/configure", config, protocol.Configured)

    def set_rate(self, rate: protocol.Rate) -> protocol.RateApplied:
        """``POST /rate``."""
        return self._call("POST", "/rate", rate, protocol.RateApplied)

    def set_consumer_delay(self, delay: protocol.ConsumerDelay) -> protocol.Done:
        """``POST /consumer_delay``."""
        return self._call("POST", "/consumer_delay", delay, protocol.Done)

    def move(self, move: protocol.Move) -> protocol.Moved:
        """``POST /move``."""
        return self._call("POST", "/move", move, protocol.Moved)

    def snapshot(self, timeout_s: float = 30.0) -> protocol.Snapshot:
        """``GET /snapshot``."""
        return self._call("GET", "/snapshot", None, protocol.Snapshot, timeout_s)

    def accounting(self) -> protocol.Accounting:
        """``GET /accounting``."""
        return self._call("GET", "/accounting", None, protocol.Accounting)

    def clock(self) -> protocol.Clock:
        """``GET /clock``."""
        return self._call("GET", "/clock", None, protocol.Clock, 5.0)

    def stop_senders(self) -> protocol.Done:
        """``POST /stop_senders`` (waits up to a minute for confirms)."""
        return self._call("POST", "/stop_senders", None, protocol.Done, 60.0)

    def stop_receivers(self) -> protocol.Done:
        """``POST /stop_receivers``."""
        return self._call("POST", "/stop_receivers", None, protocol.Done, 60.0)

    def shutdown(self, timeout_s: float = 5.0) -> protocol.Done:
        """``POST /shutdown``: the agent closes its connections and exits."""
        return self._call("POST", "/shutdown", None, protocol.Done, timeout_s)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Shut the agent down the way it was started (see the launchers)."""
        if self.closer is not None:
            self.closer(timeout_s)

    def _call(self, method: str, path: str, body: Any, reply: type[M],
              timeout_s: float = 30.0) -> M:
        """One authenticated call; :class:`AgentError` names the agent and the call."""
        data = None if body is None else protocol.dumps(body)
        if data is not None and len(data) > protocol.MAX_MESSAGE_BYTES:
            raise AgentError(f"agent {self.index} {method} {path}: the message is {len(data):,} "
                             f"bytes, over the {protocol.MAX_MESSAGE_BYTES:,} an agent reads")
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return protocol.decode(reply, json.loads(response.read()))
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise AgentError(f"agent {self.index} {method} {path}: HTTP {error.code} {detail}") \
                from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            raise AgentError(f"agent {self.index} {method} {path}: {error}",
                             unreachable=True) from None
        except (ValueError, protocol.ProtocolError) as error:
            raise AgentError(f"agent {self.index} {method} {path}: unexpected reply: {error}") \
                from None


def read_hello(line: str, where: str) -> protocol.Hello:
    """The agent's first line, checked: an agent of another protocol version (another release
    of surge on a load host) is refused before any load is sent."""
    try:
        data = json.loads(line)
    except ValueError:
        raise AgentError(f"{where} did not start: {line.strip() or 'no answer'}") from None
    if isinstance(data, dict) and data.get("protocol") != protocol.PROTOCOL_VERSION:
        raise AgentError(
            f"{where} speaks agent protocol {data.get('protocol', 1)}, this controller "
            f"{protocol.PROTOCOL_VERSION}: install the same surge version there")
    try:
        return protocol.decode(protocol.Hello, data)
    except protocol.ProtocolError as error:
        raise AgentError(f"{where} said an unexpected hello: {error}") from None


def check_protocol(agent: AgentHandle) -> None:
    """Ask a running agent which protocol it speaks; refuse a mismatch (agents whose first
    line the controller cannot read, e.g. pods)."""
    try:
        hello = agent.hello()
    except AgentError as error:
        raise AgentError(f"agent {agent.index} on {agent.host} answers no hello ({error}): "
                         f"it is not surge agent protocol {protocol.PROTOCOL_VERSION}; "
                         f"run the same surge version there") from None
    if hello.protocol != protocol.PROTOCOL_VERSION:
        raise AgentError(f"agent {agent.index} on {agent.host} speaks agent protocol "
                         f"{hello.protocol}, this controller {protocol.PROTOCOL_VERSION}: "
                         f"run the same surge version there")
