"""The Spark analysis on synthetic run directories with known answers."""

import json
import math

import numpy as np
import pytest

from drivers.histogram import SUB_COUNT
from results.analysis import analyze_run, jain_index
from results.pipeline import analyze
from results.synthetic import write_run as write_synthetic

PRECISION = 1 / SUB_COUNT  # a bucket is at most this wide relative to its lower bound


def write_run(root, name="synthetic", seed=1, format_version=2):
    """40 s in two phases; the second member serves from second 31 (see results.synthetic)."""
    run_dir = root / name
    return run_dir, write_synthetic(run_dir, seed=seed, format_version=format_version)


def test_step_table_against_hand_computed_values(spark, tmp_path):
    run_dir, _ = write_run(tmp_path)
    steps = analyze_run(spark, run_dir, price_per_core_hour=0.04).steps
    assert [s["label"] for s in steps] == ["1", "2a", "2b"]
    one, two_a, two_b = steps
    # Phase 1: seconds 3..20 are steady (settle 3 s), 18 ticks at 1,000 sent and 900 received.
    assert one["seconds"] == 18 and one["target_rate"] == 1000
    assert one["achieved_rate"] == 900 and one["min_rate"] == 900 and one["members"] == 1
    # Phase 2 splits where the second member starts (second 31); each part settles 3 s.
    assert (two_a["seconds"], two_b["seconds"]) == (8, 8)
    assert two_a["achieved_rate"] == 1800 and two_b["achieved_rate"] == 2000
    assert two_b["members"] == 2
    assert two_b["cpu_percent"] == {"surge-x-0@localhost": 25.0, "surge-x-1@localhost": 15.0}
    assert one["errors"] == 20 // 10 - 3 // 10 and one["max_backlog"] == 600


def test_percentiles_come_from_merged_histograms(spark, tmp_path):
    run_dir, raw = write_run(tmp_path)
    steps = {s["label"]: s for s in analyze_run(spark, run_dir, 0.04).steps}
    for label, values in raw.items():
        for name, q in (("p50_ms", 50), ("p95_ms", 95), ("p99_ms", 99), ("p999_ms", 99.9)):
            rank = max(1, math.ceil(q * len(values) / 100))  # nearest rank, as the histogram
            exact_ms = np.sort(values)[rank - 1] / 1000
            assert steps[label][name] == pytest.approx(exact_ms, rel=PRECISION), (label, name)
        assert steps[label]["max_ms"] == pytest.approx(values.max() / 1000, rel=PRECISION)


def test_cost_per_message_and_per_month(spark, tmp_path):
    run_dir, _ = write_run(tmp_path)
    cost = analyze_run(spark, run_dir, price_per_core_hour=0.05).cost
    # Broker: 40 s at 25% plus 10 s at 15% = 11.5 CPU-seconds; generator: 0.1 s per second.
    received = 20 * 900 + 10 * 1800 + 10 * 2000  # the run.json has no count: from the ticks
    assert cost["messages"] == received
    assert cost["broker_cpu_s"] == pytest.approx(11.5)
    assert cost["generator_cpu_s"] == pytest.approx(3.9)
    assert cost["broker_us_per_msg"] == pytest.approx(11.5e6 / received)
    assert cost["broker_cost_per_1k_msg_s_month"] == pytest.approx(
        1000 * 11.5 / received * 0.05 * 730)


def test_a_corrupt_part_is_named_and_the_rest_is_analysed(spark, tmp_path):
    run_dir, _ = write_run(tmp_path)
    bad = run_dir / "metrics" / "ticks" / "part-00001.parquet"
    bad.write_bytes(b"not parquet at all")
    result = analyze_run(spark, run_dir, 0.04)
    assert any(str(bad) in p and "skipped" in p for p in result.problems), result.problems
    assert [s["label"] for s in result.steps] == ["1", "2a", "2b"]
    assert result.steps[0]["seconds"] == 8  # seconds 11-20 of phase 1 were in the bad part


def test_analyze_is_incremental_and_reports_bad_runs_without_stopping(spark, tmp_path):
    good, _ = write_run(tmp_path, "good")
    other, _ = write_run(tmp_path, "other", seed=2)
    future = tmp_path / "future"
    future.mkdir()
    (future / "run.json").write_text(json.dumps({"format_version": 99}))
    said = []
    first = analyze([good, other, future], say=said.append)
    assert first.analysed == [good, other] and list(first.failed) == [future]
    assert "format_version 99" in first.failed[future]
    for name in ("report.md", "steps.csv", "members.csv", "analysis.json", "rate.png",
                 "cpu.png", "latency.png", "backlog.png"):
        assert (good / "analysis" / name).stat().st_size > 0, name
    again = analyze([good, other], say=said.append)
    assert again.analysed == [] and again.skipped == [good, other]
    with (other / "events.jsonl").open("a") as events:
        events.write('{"t": 2000.0, "kind": "note"}\n')
    changed = analyze([good, other], say=said.append)
    assert changed.analysed == [other]


def test_message_shares_per_member_and_the_previous_format(spark, tmp_path):
    current, _ = write_run(tmp_path, "current")
    result = analyze_run(spark, current, 0.04)
    two_b = result.steps[-1]
    # 2b spans seconds 33-40; the counters advance over 34-40: 7 s of 2,000 msg/s, 60/40.
    assert two_b["delivered_per_member"] == {"surge-x-0@localhost": 8400,
                                             "surge-x-1@localhost": 5600}
    assert two_b["balance"] == pytest.approx(jain_index([8400, 5600]))
    # Over the whole run, a member's first sample is its baseline (counters are cumulative):
    # the second member delivers 9 s x 800 after second 31, the first 47,100 after second 1.
    shares = {m["member"]: m["message_share"] for m in result.members}
    assert shares["surge-x-1@localhost"] == pytest.approx(7200 / (7200 + 47100))
    previous, _ = write_run(tmp_path, "previous", format_version=1)
    old = analyze_run(spark, previous, 0.04)
    assert [s["label"] for s in old.steps] == ["1", "2a", "2b"]
    assert old.steps[-1]["delivered_per_member"] == {}
    assert old.steps[-1]["balance"] == pytest.approx(jain_index([25.0, 15.0]))  # from CPU
    assert all(m["message_share"] is None for m in old.members)
