"""The Spark analysis on synthetic run directories with known answers."""

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.campaign.requirement import judge
from orchestrator.specs.campaign import Requirement
from results.analysis import analyze_run
from results.compare import as_text, final_step
from results.pipeline import analyze
from results.report import step_table_text
from results.rundir.histogram import SUB_COUNT
from results.rundir.manifest import FORMAT_VERSION, read_manifest
from results.rundir.steps import FIGURES, drain_row, jain_index, step_rows
from results.rundir.tables import CONTROLLER_HOST, read_table, table_files
from results.synthetic import DRAIN_RATE
from results.synthetic import write_run as write_synthetic

PRECISION = 1 / SUB_COUNT  # a bucket is at most this wide relative to its lower bound


def write_run(root, name="synthetic", seed=1, format_version=FORMAT_VERSION, **options):
    """40 s in two phases; the second member serves from second 31 (see results.synthetic)."""
    run_dir = root / name
    return run_dir, write_synthetic(run_dir, seed=seed, format_version=format_version,
                                    **options)


def controller_rows(run_dir, manifest):
    """The step rows the controller makes of what it recorded (here read back from Parquet)."""
    rows = {table: sorted(read_table(run_dir, table).to_pylist(), key=lambda r: r["elapsed_s"])
            for table in ("ticks", "members", "hosts", "agents")}
    steps = step_rows(manifest.phases, rows["ticks"], rows["members"], manifest.settle_s,
                      rows["hosts"], rows["agents"])
    return steps, drain_row(manifest.phases, rows["ticks"], rows["members"], rows["hosts"],
                      rows["agents"])


@pytest.mark.parametrize("format_version", [FORMAT_VERSION, 2, 1])
def test_spark_step_rows_are_the_controllers(spark, tmp_path, format_version):
    # Seconds 5-6 and all of 2b (33-40) unknown: rates, percentiles and member 1's figures.
    run_dir, _ = write_run(tmp_path, format_version=format_version, drain_s=5,
                           unknown={5, 6, *range(33, 41)})
    result = analyze_run(spark, run_dir, 0.04)
    steps, drain = controller_rows(run_dir, result.manifest)
    got = result.steps + [result.drain]
    assert [r.label for r in got] == ["1", "2a", "2b", "drain"]
    assert len(FIGURES) >= 28  # every declared field is compared, the balance's too
    for want, row in zip(steps + [drain], got):
        for name in FIGURES:
            assert getattr(row, name) == pytest.approx(getattr(want, name)), (want.label, name)
    one, _, two_b, drain = got
    assert one.achieved_rate == 900  # known seconds only
    assert two_b.achieved_rate is None and two_b.p99_ms is None
    assert drain.seconds == 4 and drain.received_rate == DRAIN_RATE  # 5 s, the first one out
    if format_version == FORMAT_VERSION:
        assert one.missing_seconds == 2 and two_b.hosts_cpu_percent == {"broker-1": 30.0}
    # The settle: seconds 1-2, 21-22 and 31-32 of the steps are in no row.
    assert result.settle_excluded_s == 6


def test_report_compare_and_verdicts_print_the_same_figures(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, drain_s=5, unknown={5, 6, 38})
    manifest = read_manifest(run_dir)
    steps, drain = controller_rows(run_dir, manifest)
    accounting = {"sent": 56_000, "received": 56_000, "balanced": True, "lost": 0,
                  "still_queued": 0, "unexplained": 0}
    manifest = manifest.replace(accounting=accounting)
    manifest.replace(steps=steps, drain=drain).write(run_dir)  # as the controller records them
    assert analyze([run_dir], say=lambda line: None).analysed == [run_dir]
    spark_rows = analyze_run(spark, run_dir, 0.04)
    report = (run_dir / "analysis" / "report.md").read_text()
    assert step_table_text(steps + [drain]) in report
    assert step_table_text(spark_rows.steps + [spark_rows.drain]) in report
    _, final, _ = final_step(run_dir)
    assert final == read_manifest(run_dir).steps[-1] == steps[-1]
    compared = as_text([run_dir])
    (run_dir / "run.json").write_text(json.dumps(
        manifest.replace(steps=spark_rows.steps, drain=spark_rows.drain).to_json()))
    assert as_text([run_dir]) == compared
    for requirement in (Requirement(), Requirement(rate_within="15%", p99_below="1s"),
                        Requirement(rate="published", lossless=False)):
        assert judge(requirement, read_manifest(run_dir).replace(outcome="completed")) == \
            judge(requirement, manifest.replace(steps=steps, outcome="completed"))


def test_balance_and_shares_are_over_known_readings(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, unknown={38, 39, 40})
    result = analyze_run(spark, run_dir, 0.04)
    two_b = result.steps[-1]
    assert two_b.unknown_per_member == {"surge-x-1@localhost": 3}
    assert two_b.balance_seconds == 8 - 3
    # member 1's count is known over 33-37: its delivery rate there, not a count cut short
    assert two_b.balance == pytest.approx(jain_index([1200, 800]))
    second = next(m for m in result.members if m["member"] == "surge-x-1@localhost")
    assert second["cpu_unknown_s"] == 3 and second["seconds_serving"] == 10
    assert second["cpu_seconds"] == pytest.approx(7 * 0.15)  # unknown seconds are not 0 s
    whole = analyze_run(spark, write_run(tmp_path, "throughout", unknown=range(31, 41))[0],
                        0.04)
    assert whole.steps[-1].balance is None  # member 1 unknown in all of 2b


def test_step_table_against_hand_computed_values(spark, tmp_path):
    run_dir, _ = write_run(tmp_path)
    steps = analyze_run(spark, run_dir, price_per_core_hour=0.04).steps
    assert [s.label for s in steps] == ["1", "2a", "2b"]
    one, two_a, two_b = steps
    # Phase 1: seconds 3..20 are steady (settle 3 s), 18 ticks at 1,000 sent and 900 received.
    assert one.seconds == 18 and one.target_rate == 1000
    assert one.achieved_rate == 900 and one.min_rate == 900 and one.members == 1
    # Phase 2 splits where the second member starts (second 31); each part settles 3 s.
    assert (two_a.seconds, two_b.seconds) == (8, 8)
    assert two_a.achieved_rate == 1800 and two_b.achieved_rate == 2000
    assert two_b.members == 2
    assert two_b.cpu_percent == {"surge-x-0@localhost": 25.0, "surge-x-1@localhost": 15.0}
    assert one.errors == 20 // 10 - 3 // 10 and one.max_backlog == 600
    # Member 0's memory: 96 MiB + the second's number against 128 MiB, in alarm after 32.
    first, second = "surge-x-0@localhost", "surge-x-1@localhost"
    assert one.memory_percent == {first: pytest.approx(100 * (96 + 20) / 128)}
    assert one.memory_alarm_seconds == {first: 0} and one.disk_alarm_seconds == {first: 0}
    assert two_b.memory_percent == {first: pytest.approx(100 * (96 + 40) / 128),
                                    second: 50.0}
    assert two_b.memory_alarm_seconds == {first: 8, second: 0}  # seconds 33-40


def test_percentiles_come_from_merged_histograms(spark, tmp_path):
    run_dir, raw = write_run(tmp_path)
    steps = {s.label: s for s in analyze_run(spark, run_dir, 0.04).steps}
    for label, values in raw.items():
        for name, q in (("p50_ms", 50), ("p95_ms", 95), ("p99_ms", 99), ("p999_ms", 99.9)):
            rank = max(1, math.ceil(q * len(values) / 100))  # nearest rank, as the histogram
            exact_ms = np.sort(values)[rank - 1] / 1000
            assert getattr(steps[label], name) == pytest.approx(exact_ms, rel=PRECISION), \
                (label, name)
        assert steps[label].max_ms == pytest.approx(values.max() / 1000, rel=PRECISION)


def test_cost_per_message_and_per_month(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, drain_s=10)
    cost = analyze_run(spark, run_dir, price_per_core_hour=0.05).cost
    # Broker: 40 s at 25% plus 10 s at 15% = 11.5 CPU-seconds; generator: 0.1 s per second;
    # the drain (seconds 41-50) left out.
    received = 20 * 900 + 10 * 1800 + 10 * 2000  # the run.json has no count: from the ticks
    assert cost["messages"] == received and cost["span_s"] == [0.0, 40.0]
    assert cost["broker_cpu_s"] == pytest.approx(11.5)
    assert cost["generator_cpu_s"] == pytest.approx(3.9)
    assert cost["broker_us_per_msg"] == pytest.approx(11.5e6 / received)
    assert cost["broker_cost_per_1k_msg_s_month"] == pytest.approx(
        1000 * 11.5 / received * 0.05 * 730)
    # by host, everything on it: the controller's at 1 core busy, broker-1's at 0.6 of one
    assert cost["hosts_cpu_s"] == pytest.approx({CONTROLLER_HOST: 40.0, "broker-1": 24.0})
    assert cost["host_us_per_msg"] == pytest.approx({CONTROLLER_HOST: 40e6 / received,
                                                     "broker-1": 24e6 / received})
    drained = analyze_run(spark, run_dir, 0.05, include_drain=True).cost
    assert drained["messages"] == received + 10 * DRAIN_RATE
    assert drained["broker_cpu_s"] == pytest.approx(11.5 + 10 * 0.40)
    assert drained["generator_cpu_s"] == pytest.approx(4.9)


def test_cost_is_unknown_without_member_cpu(spark, tmp_path):
    run_dir, _ = write_run(tmp_path)
    for part in table_files(run_dir, "members"):
        table = pq.read_table(part)
        column = table.schema.get_field_index("cpu_percent")
        pq.write_table(table.set_column(column, "cpu_percent", pa_nulls(table.num_rows)), part)
    result = analyze_run(spark, run_dir, 0.05)
    assert result.cost["broker_cpu_s"] is None and result.cost["broker_us_per_msg"] is None
    assert result.cost["broker_cost_per_1k_msg_s_month"] is None
    assert result.cost["generator_us_per_msg"] is not None
    assert any("broker cost unknown" in p for p in result.problems)
    assert all(m["cpu_share"] is None for m in result.members)


def pa_nulls(rows):
    import pyarrow as pa
    return pa.nulls(rows, pa.float64())


def test_cpu_seconds_of_earlier_formats_use_the_time_between_rows(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, format_version=2)
    result = analyze_run(spark, run_dir, 0.05)
    # Each member's first row has no previous one: member 0 counts 39 s, member 1 10 s
    # (its rows before it served are there, CPU unknown).
    assert result.cost["broker_cpu_s"] == pytest.approx(39 * 0.25 + 10 * 0.15)
    assert any("no cpu_interval_s" in p for p in result.problems)


def test_a_corrupt_part_is_named_and_the_rest_is_analysed(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, compacted=False)
    bad = run_dir / "metrics" / "ticks" / "part-00001.parquet"
    bad.write_bytes(b"not parquet at all")
    result = analyze_run(spark, run_dir, 0.04)
    assert any(str(bad) in p and "skipped" in p for p in result.problems), result.problems
    assert [s.label for s in result.steps] == ["1", "2a", "2b"]
    assert result.steps[0].seconds == 8  # seconds 11-20 of phase 1 were in the bad part


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
                 "cpu.png", "latency.png", "backlog.png", "memory.png", "hosts.png",
                 "network.png", "connections.png"):
        assert (good / "analysis" / name).stat().st_size > 0, name
    report = (good / "analysis" / "report.md").read_text()
    assert "![memory.png](memory.png)" in report and "![hosts.png](hosts.png)" in report
    assert "m0 mem%" in report and "mem alarm s" in report
    assert "suspect samples: 0 member CPU above quota" in \
        (good / "analysis" / "report.md").read_text()
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
    assert two_b.delivered_per_member == {"surge-x-0@localhost": 8400,
                                          "surge-x-1@localhost": 5600}
    assert two_b.balance == pytest.approx(jain_index([8400, 5600]))
    # Over the whole run, a member's first sample is its baseline (counters are cumulative):
    # the second member delivers 9 s x 800 after second 31, the first 47,100 after second 1.
    shares = {m["member"]: m["message_share"] for m in result.members}
    assert shares["surge-x-1@localhost"] == pytest.approx(7200 / (7200 + 47100))
    previous, _ = write_run(tmp_path, "previous", format_version=1)
    old = analyze_run(spark, previous, 0.04)
    assert [s.label for s in old.steps] == ["1", "2a", "2b"]
    assert old.steps[-1].delivered_per_member == {}
    assert old.steps[-1].balance == pytest.approx(jain_index([25.0, 15.0]))  # from CPU
    assert all(m["message_share"] is None for m in old.members)


def test_report_says_what_each_row_covers_and_how_the_run_measured(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, drain_s=5, unknown={5, 6})
    said = []
    assert analyze([run_dir], say=said.append).analysed == [run_dir]
    report = (run_dir / "analysis" / "report.md").read_text()
    table = report.split("```")[1].splitlines()
    assert "broker-1 CPU%" in table[1] and "skipped" in table[1] and "span s" in table[1]
    assert "p99 ms" in table[1] and "intended p99 ms" in table[1]
    assert "Intended p50/p99/max: latency measured from when the sender's schedule" in report
    # the drain's first second (41) carries the step's last readings: the drain row starts after it
    assert table[-1].split()[:2] == ["drain", "41-45"]
    assert "first 3 s of each part (settle: 6 seconds left out in all)" in report
    assert "2 seconds had a source missing" in report
    assert "suspect samples: " in report and "skipped sends: 4 " in report
    assert "tick lateness p50 0.010 s, p99 0.020 s, max 0.030 s over 45 ticks" in report
    assert "56,000 messages received over seconds 0-40 (the steps" in report
    saved = json.loads((run_dir / "analysis" / "analysis.json").read_text())
    assert saved["drain"]["label"] == "drain" and saved["skipped_sends"] == 4
    assert saved["suspect_samples"]["total"] == 0


def test_a_run_from_before_the_intended_latency_is_analysed_without_it(spark, tmp_path):
    run_dir, _ = write_run(tmp_path, intended=False)
    result = analyze_run(spark, run_dir, 0.04)
    steps, _ = controller_rows(run_dir, result.manifest)
    assert [r.p99_ms for r in result.steps] == pytest.approx([r.p99_ms for r in steps])
    assert all(r.p99_ms is not None for r in result.steps)
    assert [r.intended_p99_ms for r in result.steps] == [None] * len(steps)
