"""The rows one tick writes (``ticks``, ``members``, ``hosts``, ``agents``), built from the
tick's figures: pure, so what lands in a run directory is tested without a broker.

A figure no source gave this second is ``None`` (unknown), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from orchestrator.run.sampling import COUNTERS, AgentReading, Tick
from results.rundir.figures import CONFIRM, INTENDED, LATENCY
from results.rundir.tables import CONTROLLER_HOST, latency_columns
from topologies.base import BrokerResources, MemberSample

AGENT_COUNTERS = ("sent", "received", "errors", "reconnects", "skipped")


def stamp(wall_s: float, elapsed_s: float, phase: int) -> dict[str, Any]:
    """What every row of one tick starts with: wall time, seconds since the load started, and
    the plan step (0 before the first and while draining)."""
    return {"t": wall_s, "elapsed_s": elapsed_s, "phase": phase}


def tick_row(stamped: dict[str, Any], tick: Tick, *, lateness_s: float, target_rate: float,
             members_running: int, queue_depth: int | None, depth_age_s: float | None,
             read_span_s: float | None, broker_missing: bool,
             agents_lost: int = 0, copies: int | None = 1) -> dict[str, Any]:
    """The ``ticks`` row: rates, totals, depth, latency percentiles (from the actual and from
    the intended send times) and how well the second was sampled. ``copies``: the queues each
    message reaches (an exchange may route it to several; ``None``: not the same number for
    every message, so the backlog is unknown)."""
    totals, rates = tick.totals, tick.rates
    return {**stamped, "lateness_s": lateness_s, "target_rate": target_rate,
            "send_rate": rates["sent"], "receive_rate": rates["received"],
            "confirm_rate": rates["confirmed"], "skip_rate": rates["skipped"],
            **{k: totals[k] for k in COUNTERS},
            "members_running": members_running, "queue_depth": queue_depth,
            "depth_age_s": depth_age_s,
            # a lost agent's sends and receipts after its last reading are unknown; below 0
            # only where receivers were read later than senders (read_span_s): none in flight
            "backlog": None if copies is None or agents_lost
            else max(0, totals["sent"] * copies - totals["received"]),
            "agents_missing": tick.agents_missing, "read_span_s": read_span_s,
            "broker_missing": broker_missing, "agents_lost": agents_lost,
            "host_cpu_percent": tick.host_cpu_percent.get(CONTROLLER_HOST),
            "sending": tick.sending, "consuming": tick.consuming,
            "queues_in_use": tick.queues_in_use,
            **latency_columns(LATENCY, tick.latency), **latency_columns(INTENDED, tick.intended),
            **latency_columns(CONFIRM, tick.confirm)}


def member_rows(stamped: dict[str, Any], members: Iterable[MemberSample], tick: Tick,
                network_link_mbps: float | None = None) -> list[dict[str, Any]]:
    """One ``members`` row per member as this tick saw it (``network_link_mbps``: the
    bandwidth of each member's link, each way, where the topology gives it)."""
    return [{**stamped, "member": m.name, "running": m.running,
             "cpu_percent": tick.member_cpu_percent.get(m.name),
             "cpu_interval_s": tick.member_cpu_interval_s.get(m.name),
             "cpu_age_s": m.cpu_age_s if tick.member_cpu_percent.get(m.name) is not None
             else None,
             "cpu_quota_cores": m.cpu_quota_cores, "connections": m.connections,
             "messages_in": m.messages_in, "messages_out": m.messages_out,
             **resource_columns(m.resources),
             **dict(zip(("network_in_mbps", "network_out_mbps"),
                        tick.member_network_mbps.get(m.name, (None, None)))),
             "network_link_mbps": network_link_mbps} for m in members]


def resource_columns(resources: BrokerResources | None) -> dict[str, Any]:
    """A member's resource figures as its ``members`` row's columns (all null if unknown)."""
    figures = resources or BrokerResources()
    return {**asdict(figures),
            "memory_percent_of_watermark": figures.memory_percent_of_watermark}


def host_rows(stamped: dict[str, Any], tick: Tick) -> list[dict[str, Any]]:
    """One ``hosts`` row per host whose CPU this tick knows (the controller's and brokers')."""
    return [{**stamped, "host": host, "cpu_percent": percent,
             "cpu_interval_s": tick.host_cpu_interval_s.get(host),
             "cpu_cores_busy": tick.host_cores_busy.get(host)}
            for host, percent in tick.host_cpu_percent.items()]


def agent_rows(stamped: dict[str, Any], readings: dict[int, AgentReading], since: float,
               tick: Tick) -> list[dict[str, Any]]:
    """One ``agents`` row per agent whose reading arrived at or after ``since`` (controller
    clock): an agent that missed the tick gets no row."""
    rows = []
    for index, r in readings.items():
        if r.seen >= since:
            buckets = r.latency.to_sparse()
            rows.append({**stamped, "agent": index, "monotonic_s": r.at,
                         **{k: r.counters[k] for k in AGENT_COUNTERS},
                         "cpu_percent": tick.agent_cpu_percent.get(index),
                         "cpu_seconds": r.cpu_seconds, "latency_buckets": list(buckets),
                         "latency_counts": list(buckets.values())})
    return rows
