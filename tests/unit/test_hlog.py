"""HdrHistogram interop: surge's histograms written as HdrHistogram's compressed V2 encoding and
interval log, read back by the reference reader (the ``hdrhistogram`` package), give surge's own
counts exactly and its percentiles within the precision the encoder states."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from typer.testing import CliRunner

from orchestrator.cli import app
from results.rundir.figures import INTENDED, LATENCY
from results.rundir.histogram import MAX_VALUE_US, LatencyHistogram, bucket_index
from results.rundir.hlog import (
    HIGHEST_TRACKABLE_US,
    LOWEST_DISCERNIBLE_US,
    SIGNIFICANT_DIGITS,
    encode,
    hdr_index,
)
from results.rundir.tables import read_table
from results.synthetic import write_run

QUANTILES = (50.0, 90.0, 99.0, 99.9)
SAMPLES = 20_000  # q * SAMPLES / 100 is whole for every quantile: both rank rules agree


def reference() -> HdrHistogram:
    """An empty reference histogram with the encoder's parameters."""
    return HdrHistogram(LOWEST_DISCERNIBLE_US, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)


def lognormal(seed: int, n: int = SAMPLES, mean: float = 9.0) -> LatencyHistogram:
    histogram = LatencyHistogram()
    values = np.random.default_rng(seed).lognormal(mean, 1.5, size=n).astype(np.int64)
    for value in values.tolist():
        histogram.record(value)
    return histogram


def surge_buckets(decoded: HdrHistogram) -> dict[int, int]:
    """The reader's counts summed per surge bucket."""
    per_bucket: Counter[int] = Counter()
    for item in decoded.get_recorded_iterator():
        per_bucket[bucket_index(item.value_iterated_to)] += item.count_at_value_iterated_to
    return dict(per_bucket)


def assert_within_precision(read: float, surge: float) -> None:
    """The module's promise: surge's answer s, the reader's v: s - 1 < v < s + max(1, s/1024),
    in the same surge bucket."""
    assert surge - 1 < read < surge + max(1.0, surge / 1024), (read, surge)
    assert bucket_index(int(read)) == bucket_index(int(surge)), (read, surge)


def test_the_index_is_the_reference_readers_over_the_whole_range():
    ref = reference()
    values = [0, 1, 63, 64, 2047, 2048, 2049, 4095, 4096, 123_456_789, MAX_VALUE_US]
    values += np.random.default_rng(5).integers(0, MAX_VALUE_US, 2000).tolist()
    assert [hdr_index(v) for v in values] == [ref.get_counts_array_index(v) for v in values]


@pytest.mark.parametrize("seed, mean", [(1, 9.0), (2, 4.0), (3, 14.0)])
def test_a_histogram_reads_back_with_surges_counts_and_percentiles(seed, mean):
    histogram = lognormal(seed, mean=mean)
    decoded = HdrHistogram.decode(encode(histogram))
    assert decoded.get_total_count() == histogram.count == SAMPLES
    assert surge_buckets(decoded) == histogram.to_sparse()
    for q in QUANTILES:
        assert_within_precision(decoded.get_value_at_percentile(q), histogram.percentile(q))
    least = decoded.get_min_value()  # the lowest value of the min's bucket: exact below 2,048
    assert histogram.min_us - max(1, histogram.min_us / 1024) < least <= histogram.min_us
    assert bucket_index(least) == bucket_index(histogram.min_us)
    assert_within_precision(decoded.get_max_value(), histogram.max_us)


def test_edge_histograms_read_back_exactly():
    empty = HdrHistogram.decode(encode(LatencyHistogram()))
    assert empty.get_total_count() == 0
    single = LatencyHistogram()
    single.record(777)
    one = HdrHistogram.decode(encode(single))
    assert (one.get_total_count(), one.get_min_value(), one.get_max_value()) == (1, 777, 777)
    wide = LatencyHistogram()
    wide.record_many(0, 3)
    wide.record_many(MAX_VALUE_US, 2)
    wide.record_many(5_000, 10**12)  # counts of several LEB128 bytes
    decoded = HdrHistogram.decode(encode(wide))
    assert decoded.get_total_count() == 10**12 + 5
    assert surge_buckets(decoded) == wide.to_sparse()
    assert decoded.get_min_value() == 0
    assert_within_precision(decoded.get_max_value(), MAX_VALUE_US)


def read_log(path: Path) -> tuple[float, list[HdrHistogram]]:
    reader = HistogramLogReader(str(path), reference())
    intervals = []
    while (interval := reader.get_next_interval_histogram()) is not None:
        intervals.append(interval)
    reader.close()
    return reader.get_start_time_sec(), intervals


def test_a_run_exports_one_interval_per_tick_and_kind(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, seconds=40, samples=SAMPLES // 40)
    out = tmp_path / "run.hlog"
    done = CliRunner().invoke(app, ["export-hlog", str(run_dir), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "40 intervals of about 1 s per tag (latency, intended)" in done.output
    start, intervals = read_log(out)
    ticks = read_table(run_dir, "ticks").to_pylist()
    assert start == pytest.approx(1000.0)  # the synthetic ticks: t = 1000 + elapsed_s
    assert len(intervals) == 2 * len(ticks) == 80
    for kind in (LATENCY, INTENDED):
        mine = [i for i in intervals if i.get_tag() == kind]
        starts = [(i.get_start_time_stamp() / 1000 - start) for i in mine]
        assert starts == pytest.approx([max(0.0, t["elapsed_s"] - 1) for t in ticks])
        ends = [(i.get_end_time_stamp() / 1000 - start) for i in mine]
        assert ends == pytest.approx([t["elapsed_s"] for t in ticks])
        assert [i.get_total_count() for i in mine] == [sum(t[f"{kind}_counts"]) for t in ticks]
        merged, total = reference(), LatencyHistogram()
        for interval, tick in zip(mine, ticks, strict=True):
            merged.add(interval)
            total.merge(LatencyHistogram.from_sparse(
                dict(zip(tick[f"{kind}_buckets"], tick[f"{kind}_counts"], strict=True))))
        assert merged.get_total_count() == total.count == SAMPLES
        assert surge_buckets(merged) == total.to_sparse()
        for q in QUANTILES:
            assert_within_precision(merged.get_value_at_percentile(q), total.percentile(q))
        assert_within_precision(merged.get_max_value(), total.max_us)


def test_the_log_names_its_units_and_steps_and_asks_only_for_kinds_recorded(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, seconds=40, samples=50, intended=False)
    done = CliRunner().invoke(app, ["export-hlog", str(run_dir)])
    assert done.exit_code == 0, done.output
    head = [line for line in done.stdout.splitlines() if line.startswith("#")]
    assert "latency in microseconds (µs)" in head[0] and "Interval_Max in ms" in head[0]
    assert "#[Step 2: 20.000 s to 40.000 s after StartTime]" in head
    assert not any(line.startswith("Tag=intended") for line in done.stdout.splitlines())
    asked = CliRunner().invoke(app, ["export-hlog", str(run_dir), "--kind", INTENDED])
    assert asked.exit_code == 1
    assert asked.output.strip().count("\n") == 0
    assert "no intended latency recorded" in asked.output and "this run has latency" in \
        asked.output


def test_a_bad_run_directory_is_one_clear_line(tmp_path):
    done = CliRunner().invoke(app, ["export-hlog", str(tmp_path), "-o",
                                    str(tmp_path / "x.hlog")])
    assert done.exit_code == 2
    assert done.output.strip() == f"{tmp_path / 'run.json'}: not found; expected a run directory"
    assert not (tmp_path / "x.hlog").exists()
