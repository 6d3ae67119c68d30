"""Member figures of a queue manager from IBM's Prometheus exporter (mq-metric-samples'
``mq_prometheus``, one endpoint per queue manager, metrics ``ibmmq_*``).

Read: the queue manager's CPU estimate (user + system, published as a percentage of its host),
its connection count, and per queue the depth and the MQPUT/MQGET counts of the last interval.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

CPU_METRICS = ("ibmmq_qmgr_user_cpu_time_estimate_for_queue_manager_percentage",
               "ibmmq_qmgr_system_cpu_time_estimate_for_queue_manager_percentage")
CONNECTIONS = "ibmmq_qmgr_connection_count"
DEPTH = "ibmmq_queue_depth"
PUTS = "ibmmq_queue_mqput_mqput1_count"
GETS = "ibmmq_queue_mqget_count"


@dataclass
class ExporterReading:
    """One scrape of one queue manager's exporter."""

    cpu_percent_of_host: float | None = None
    connections: int | None = None
    depths: dict[str, int] = field(default_factory=dict)
    puts: dict[str, int] = field(default_factory=dict)  # per queue, the exporter's interval
    gets: dict[str, int] = field(default_factory=dict)

    def cpu_percent_of_core(self, host_cpus: int | None) -> float | None:
        """CPU as % of one core (the unit surge reports everywhere), given the host's cores."""
        if self.cpu_percent_of_host is None or not host_cpus:
            return None
        return self.cpu_percent_of_host * host_cpus


def read(text: str, qmgr: str) -> ExporterReading:
    """The figures of queue manager ``qmgr`` in an exporter's Prometheus text."""
    reading = ExporterReading()
    cpu = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("qmgr", qmgr) != qmgr:
                continue
            queue = sample.labels.get("queue")
            if sample.name in CPU_METRICS:
                cpu.append(sample.value)
            elif sample.name == CONNECTIONS:
                reading.connections = int(sample.value)
            elif queue and sample.name in (DEPTH, PUTS, GETS):
                target = {DEPTH: reading.depths, PUTS: reading.puts, GETS: reading.gets}
                target[sample.name][queue] = int(sample.value)
    if cpu:
        reading.cpu_percent_of_host = sum(cpu)
    return reading


def scrape(url: str, qmgr: str, timeout_s: float = 2.0) -> ExporterReading | None:
    """Read one exporter endpoint; None when it cannot be reached (the member is down or the
    exporter is not running), so a sample goes on without it."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return read(response.read().decode(errors="replace"), qmgr)
    except (urllib.error.URLError, OSError, ValueError):
        return None
