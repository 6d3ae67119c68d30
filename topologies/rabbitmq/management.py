"""A small client for RabbitMQ's management HTTP API, over HTTP or HTTPS, with the cluster's
credentials."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.routing import BindingSpec, ExchangeSpec
from orchestrator.specs.topology import QueueSpec
from topologies.base import Member, MemberStats
from topologies.rabbitmq import queues


class Management:
    """Calls to one member's management listener; any running member sees the whole cluster.
    ``tls``: a client context for an ``https`` listener; ``vhost`` is where queues are."""

    def __init__(self, host: str, port: int, user: str, password: str,
                 timeout_s: float = 5.0, tls: ssl.SSLContext | None = None, vhost: str = "/"):
        name = f"[{host}]" if ":" in host else host
        self.base = f"{'https' if tls else 'http'}://{name}:{port}/api"
        self.timeout_s, self.tls = timeout_s, tls
        self._vhost = urllib.parse.quote(vhost, safe="")
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One API call; JSON in and out. Raises ``ProvisionError`` (temporary) on failure."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self._auth)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=self.tls) as response:
                payload = response.read()
        except (urllib.error.URLError, OSError) as error:
            raise ProvisionError(f"management API {method} {path} at {self.base}: {error}",
                                 temporary=True) from None
        return json.loads(payload) if payload else None

    def declare_queue(self, queue: QueueSpec, name: str | None = None) -> None:
        """Declare ``queue`` (as ``name``, for an instance) with its type and x-arguments.

        Declared through this member's API, a queue is led by this member.
        """
        body: dict[str, Any] = {"durable": queue.durable, "auto_delete": queue.auto_delete,
                                "arguments": queues.arguments(queue)}
        quoted = urllib.parse.quote(name or queue.name, safe="")
        self.request("PUT", f"/queues/{self._vhost}/{quoted}", body)

    def declare_exchange(self, exchange: ExchangeSpec) -> None:
        """Declare ``exchange`` with its type, durability and x-arguments."""
        quoted = urllib.parse.quote(exchange.name, safe="")
        self.request("PUT", f"/exchanges/{self._vhost}/{quoted}", {
            "type": exchange.type, "durable": exchange.durable,
            "auto_delete": exchange.auto_delete, "arguments": exchange.arguments})

    def bind(self, binding: BindingSpec, destination: str) -> None:
        """Bind ``binding.exchange`` to queue ``destination`` (or, for a binding to an
        exchange, to that exchange) with its key and arguments (idempotent)."""
        kind = "q" if binding.to_exchange is None else "e"
        source = urllib.parse.quote(binding.exchange, safe="")
        target = urllib.parse.quote(destination, safe="")
        self.request("POST", f"/bindings/{self._vhost}/e/{source}/{kind}/{target}",
                     {"routing_key": binding.routing_key, "arguments": binding.arguments})

    def purge(self, name: str) -> int:
        """Remove the ready messages of queue ``name``; how many there were."""
        quoted = urllib.parse.quote(name, safe="")
        before = self.request("GET", f"/queues/{self._vhost}/{quoted}?columns=messages_ready")
        self.request("DELETE", f"/queues/{self._vhost}/{quoted}/contents")
        return int((before or {}).get("messages_ready") or 0)

    def queues(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """Messages (ready + unacknowledged) per queue of the virtual host, and per member
        node the messages published to and delivered from the queues it leads, since they
        were declared."""
        rows = self.request("GET", f"/queues/{self._vhost}?columns=name,node,messages,"
                                   "message_stats.publish,message_stats.deliver_get") or []
        depths, per_node = {}, {}
        for row in rows:
            depths[row["name"]] = int(row.get("messages") or 0)
            stats = row.get("message_stats") or {}
            published, delivered = per_node.get(row.get("node", "?"), (0, 0))
            per_node[row.get("node", "?")] = (published + int(stats.get("publish") or 0),
                                              delivered + int(stats.get("deliver_get") or 0))
        return depths, per_node

    def delete_queue(self, name: str) -> None:
        """Delete queue ``name`` of the virtual host with its messages; its consumers are
        cancelled by the broker."""
        quoted = urllib.parse.quote(name, safe="")
        self.request("DELETE", f"/queues/{self._vhost}/{quoted}")

    def quorum_queues_short(self) -> dict[str, str]:
        """Quorum queues of the virtual host that have no leader, or a member that is not
        online (a restarted member not back in the queue yet), with what is missing."""
        rows = self.request("GET", f"/queues/{self._vhost}?columns=name,type,leader,members,"
                                   "online") or []
        return {row["name"]: reason for row in rows if row.get("type") == "quorum"
                and (reason := quorum_shortfall(row))}

    def connections_per_node(self) -> Counter[str]:
        """Client connections per member node name."""
        rows = self.request("GET", "/connections?columns=node") or []
        return Counter(row.get("node", "?") for row in rows)

    def set_shovel(self, name: str, value: dict[str, Any]) -> None:
        """Declare (or replace) the dynamic shovel ``name`` of the virtual host: a runtime
        parameter the member's shovel plugin starts at once."""
        quoted = urllib.parse.quote(name, safe="")
        self.request("PUT", f"/parameters/shovel/{self._vhost}/{quoted}", {"value": value})

    def delete_shovel(self, name: str) -> None:
        """Remove the dynamic shovel ``name``: it stops, and what it held unacknowledged goes
        back to its source queue."""
        quoted = urllib.parse.quote(name, safe="")
        self.request("DELETE", f"/parameters/shovel/{self._vhost}/{quoted}")

    def shovels(self) -> dict[str, str]:
        """Each dynamic shovel of the cluster by name, with its state (starting, running,
        terminated)."""
        rows = self.request("GET", "/shovels") or []
        return {row["name"]: row.get("state", "?") for row in rows}

    def running_nodes(self) -> list[str]:
        """Names of the cluster's members that are running."""
        rows = self.request("GET", "/nodes?columns=name,running") or []
        return [row["name"] for row in rows if row.get("running")]


def management_stats(api: Management | None) -> Callable[[Member], MemberStats | None]:
    """Per member its connections and the messages the queues it leads moved, from one call of
    the management API of a running member. A member the answer leaves out (its statistics
    not in yet, or busy) is unknown, never zero; so is every member if the API does not
    answer."""
    try:
        connections = api.connections_per_node() if api else None
        _, messages = api.queues() if api else ({}, None)
    except ProvisionError:
        connections, messages = None, None

    def stats(member: Member) -> MemberStats | None:
        if connections is None or messages is None or member.name not in connections \
                or member.name not in messages:
            return None
        published, delivered = messages[member.name]
        return MemberStats(connections[member.name], published, delivered)
    return stats


def quorum_shortfall(row: dict[str, Any]) -> str:
    """What a quorum queue's management row says is missing: its leader, or members that are
    not online ("" when it has a leader and every member online)."""
    if not row.get("leader"):
        return "no leader"
    offline = sorted(set(row.get("members") or []) - set(row.get("online") or []))
    return f"{', '.join(offline)} not online" if offline else ""
