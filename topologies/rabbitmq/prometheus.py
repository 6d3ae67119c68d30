"""A member's own figures from its ``rabbitmq_prometheus`` endpoint.

Each member answers for itself, from counters it keeps current (not from the management
statistics database, which is refreshed every few seconds and leaves out nodes that are slow to
report), so one member's silence makes only that member's figures unknown.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from dataclasses import replace

from topologies.base import BrokerResources, CpuReading, MemberStats

SCRAPE_TIMEOUT_S = 2.0  # a member at its CPU quota answers slowly; late is kept, not lost
_WANTED = {"rabbitmq_connections": "connections",
           "rabbitmq_global_messages_received": "received",
           "rabbitmq_global_messages_delivered": "delivered",
           "erlang_vm_statistics_runtime_milliseconds": "runtime_ms"}  # optional: user CPU
_CORE = frozenset(_WANTED.values()) - {"runtime_ms"}  # without them the member is unknown
_RESOURCES = {  # optional, each unknown on its own when absent: BrokerResources' fields
    "rabbitmq_process_resident_memory_bytes": "memory_bytes",
    "rabbitmq_resident_memory_limit_bytes": "memory_limit_bytes",
    "rabbitmq_alarms_memory_used_watermark": "memory_alarm",
    "rabbitmq_disk_space_available_bytes": "disk_free_bytes",
    "rabbitmq_disk_space_available_limit_bytes": "disk_free_limit_bytes",
    "rabbitmq_alarms_free_disk_space_watermark": "disk_alarm",
    "rabbitmq_process_open_fds": "fds_open",
    "rabbitmq_process_max_fds": "fds_max",
    "rabbitmq_connection_incoming_bytes": "network_in_bytes",
    "rabbitmq_connection_outgoing_bytes": "network_out_bytes"}
_ALARMS = frozenset({"memory_alarm", "disk_alarm"})
_FAMILIES = {**_WANTED, **_RESOURCES}
_NAMES = frozenset(_FAMILIES) | {name + "_total" for name in _FAMILIES}  # samples and families
_PREFIXES = tuple(sorted(set(_FAMILIES) | {f"# {kind} {name}" for name in _FAMILIES
                                           for kind in ("HELP", "TYPE")}))


def node_stats(url: str, timeout_s: float = SCRAPE_TIMEOUT_S,
               tls: ssl.SSLContext | None = None, cpu: bool = False) -> MemberStats | None:
    """Scrape ``url`` (a member's ``/metrics``); ``None`` if it does not answer in time or
    lacks the figures (unknown, not zero). ``cpu``: keep the VM's CPU too, for members whose
    provisioner cannot read it on the host (one source per member, never two mixed).
    Everything is stamped with the midpoint of the scrape."""
    try:
        start = time.monotonic()
        with urllib.request.urlopen(url, timeout=timeout_s, context=tls) as response:
            text = response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
    stats = parse_node_stats(text)
    if stats is None:
        return None
    at = (start + time.monotonic()) / 2
    return replace(stats, at=at, cpu=replace(stats.cpu, at=at) if cpu and stats.cpu else None)


def wanted_lines(text: str) -> str:
    """Only the lines of ``text`` that belong to the families :func:`parse_node_stats` reads
    (their ``# HELP``/``# TYPE`` lines and samples): a member's page is some 80 kB of which a
    dozen lines matter, and parsing all of it every second was most of the controller's
    CPU with many agents."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if line.startswith(_PREFIXES) and _name(line) in _NAMES)


def _name(line: str) -> str:
    """The metric name of a sample line, or of a ``# HELP``/``# TYPE`` line."""
    if line.startswith("#"):
        return line[7:].split(None, 1)[0]
    end = len(line)
    for stop in "{ \t\n":
        found = line.find(stop)
        if 0 <= found < end:
            end = found
    return line[:end]


def _value(line: str, name: str) -> float | None:
    """The value of sample ``line`` of metric ``name`` (after its labels, before any
    timestamp); ``None`` if it is not a number."""
    rest = line[line.rfind("}") + 1:] if line.startswith("{", len(name)) else line[len(name):]
    try:
        return float(rest.split(None, 1)[0])
    except (IndexError, ValueError):
        return None


def parse_node_stats(text: str) -> MemberStats | None:
    """A member's figures from Prometheus text (summed over protocols and queue types);
    ``None`` if any of the message and connection counters is absent (a resource figure
    absent is unknown on its own: :class:`~topologies.base.BrokerResources`). No count of
    unacknowledged deliveries is made from these counters: deliveries needing an ack less
    acks keeps, for the node's lifetime, every delivery a closed channel requeued (the broker
    counts no requeues), so it never comes back to 0 (the run's depth takes the receivers'
    own counts: :mod:`orchestrator.run.depth`). The CPU is the VM's runtime (user seconds of
    all its threads; measured against the kernel's figures), not yet stamped (``at`` 0). The
    sample lines are read as they are (name, labels, value, an optional timestamp): the
    families read are plain gauges and counters, and a general parser cost more than the rest
    of the read."""
    found: dict[str, float] = {}
    for line in wanted_lines(text).splitlines():
        if line.startswith("#"):
            continue
        name = _name(line)
        key = _FAMILIES.get(name) or _FAMILIES[name.removesuffix("_total")]
        value = _value(line, name)
        if value is not None:
            found[key] = found.get(key, 0.0) + value
    if not set(found) >= _CORE:
        return None
    cpu = CpuReading(found["runtime_ms"] / 1000.0, 0.0) if "runtime_ms" in found else None
    return MemberStats(int(found["connections"]), int(found["received"]),
                       int(found["delivered"]), cpu=cpu, resources=_resources(found))


def _resources(found: dict[str, float]) -> BrokerResources | None:
    """The resource figures among ``found`` (each absent one unknown); ``None`` if none is
    there (a broker without them, or a page cut short)."""
    known = {key: bool(found[key]) if key in _ALARMS else int(found[key])
             for key in _RESOURCES.values() if key in found}
    return BrokerResources(**known) if known else None
