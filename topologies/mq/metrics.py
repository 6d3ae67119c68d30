"""Member figures of a queue manager from IBM's Prometheus exporter (mq-metric-samples'
``mq_prometheus``, one endpoint per queue manager, metrics ``ibmmq_*``).

Read: the queue manager's CPU estimate (user + system, published as a percentage of its host),
its connection count, the MQPUT/MQPUT1 and destructive MQGET counts of the queue manager and per
queue, and per queue the depth.

The exporter's figures are of two kinds. Connection count and depths come from status commands
it issues at every scrape. CPU and the MQI counts come from the queue manager's resource
publications, made every ``MonitorPublishHeartBeat`` seconds (10 by default): at each scrape the
exporter clears these gauges and sets only what the publications that arrived since the
previous scrape say, so a scrape between two publications has none of them, and the counts are
per-publication deltas (``ibmmq_qmgr_exporter_publications`` says how many it processed; see
mq-metric-samples' ``cmd/mq_prometheus/exporter.go``, ``Collect``). :mod:`topologies.mq.figures`
turns that into timed member figures.
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
QMGR_PUTS = "ibmmq_qmgr_interval_mqput_mqput1_total_count"  # delta over the publications
QMGR_GETS = "ibmmq_qmgr_interval_destructive_get_total_count"
PUBLICATIONS = "ibmmq_qmgr_exporter_publications"  # publications this scrape processed


@dataclass
class ExporterReading:
    """One scrape of one queue manager's exporter."""

    cpu_percent_of_host: float | None = None
    connections: int | None = None
    depths: dict[str, int] = field(default_factory=dict)
    puts: dict[str, int] = field(default_factory=dict)  # per queue, the exporter's interval
    gets: dict[str, int] = field(default_factory=dict)
    qmgr_puts: int | None = None  # MQPUT/MQPUT1 of the publications this scrape processed
    qmgr_gets: int | None = None  # destructive MQGETs, likewise
    publications: int | None = None  # None: an exporter that does not say

    @property
    def published(self) -> bool:
        """Whether this scrape carries figures from a new resource publication."""
        if self.publications is not None:
            return self.publications > 0
        return self.cpu_percent_of_host is not None or self.qmgr_puts is not None

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
            elif sample.name == QMGR_PUTS:
                reading.qmgr_puts = int(sample.value)
            elif sample.name == QMGR_GETS:
                reading.qmgr_gets = int(sample.value)
            elif sample.name == PUBLICATIONS:
                reading.publications = int(sample.value)
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
