"""Prometheus families the agent and the controller both expose: cumulative counters and latency
histograms in seconds, each with the labels that say whose they are."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from results.rundir.histogram import LatencyHistogram, bucket_bounds

#: Upper bounds (seconds) of the latency histograms' buckets as Prometheus sees them.
PROMETHEUS_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                        2.5, 5.0, 10.0)


def histogram_family(name: str, help_text: str, histogram: LatencyHistogram,
                     labels: Mapping[str, str]) -> HistogramMetricFamily:
    """A latency histogram as a Prometheus histogram in seconds: a bucket counts the recordings
    whose own bucket lies wholly within its bound."""
    buckets = []
    counts = histogram.to_sparse()
    for bound in PROMETHEUS_BUCKETS_S:
        limit_us = bound * 1e6
        buckets.append((str(bound), sum(c for i, c in counts.items()
                                        if bucket_bounds(i)[1] <= limit_us)))
    buckets.append(("+Inf", histogram.count))
    family = HistogramMetricFamily(name, help_text, labels=list(labels))
    family.add_metric(list(labels.values()), buckets, histogram.total_us / 1e6)
    return family


def counter_family(name: str, help_text: str, value: float, labels: Mapping[str, str]
                   ) -> CounterMetricFamily:
    """One cumulative count (``name`` without ``_total``: the client adds it)."""
    family = CounterMetricFamily(name, help_text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def gauge_family(name: str, help_text: str, value: float | None, labels: Mapping[str, str]
                 ) -> GaugeMetricFamily:
    """One value now; no sample where it is unknown (``None``), so a graph shows a gap and a
    tile its last known value, never NaN."""
    family = GaugeMetricFamily(name, help_text, labels=list(labels))
    if value is not None:
        family.add_metric(list(labels.values()), value)
    return family
