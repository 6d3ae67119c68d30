import pytest

from results.rundir.histogram import LatencyHistogram
from results.rundir.steps import as_text, step_rows

PHASES = [{"index": 1, "rate_per_sender": 10, "start_s": 0, "end_s": 10},
          {"index": 2, "rate_per_sender": 20, "start_s": 10, "end_s": 20}]


def tick(elapsed, phase, target, send, latencies_us=(), errors=0):
    histogram = LatencyHistogram()
    for value in latencies_us:
        histogram.record(value)
    sparse = histogram.to_sparse()
    return {"elapsed_s": elapsed, "phase": phase, "target_rate": target, "send_rate": send,
            "receive_rate": send, "members_running": 2, "host_cpu_percent": 50.0,
            "errors": errors, "latency_buckets": list(sparse),
            "latency_counts": list(sparse.values())}


def test_steady_window_rates_cpu_and_merged_percentiles():
    ticks = [tick(e, 1, 100, 100 if e >= 3 else 10, [1000] * 10) for e in range(1, 10)]
    ticks += [tick(e, 2, 200, 150, [1000] * 90 + [50_000] * 10, errors=e) for e in range(10, 20)]
    members = [{"elapsed_s": e, "member": "m-0@h", "running": True, "cpu_percent": 40.0 + e % 2}
               for e in range(20)]
    rows = step_rows(PHASES, ticks, members, settle_s=3)
    first, second = rows
    assert first.achieved_rate == pytest.approx(100)  # the ramp-up seconds are left out
    assert first.ratio == pytest.approx(1.0)
    assert second.achieved_rate == pytest.approx(150) and second.ratio == pytest.approx(0.75)
    assert second.seconds == 7
    assert first.p50_ms == pytest.approx(1.0, rel=0.04)
    assert second.p99_ms == pytest.approx(50.0, rel=0.04)  # merged, not averaged
    assert second.errors == 19 - 13
    assert first.cpu_percent["m-0@h"] == pytest.approx(40.5, abs=0.1)
    text = as_text(rows)
    assert "target msg/s" in text and "m0 CPU%" in text and "150" in text


def test_phase_without_steady_ticks_is_left_out():
    rows = step_rows(PHASES, [tick(1, 1, 100, 100)], [], settle_s=3)
    assert rows == []


def test_a_member_start_splits_a_step():
    ticks = [tick(e, 1, 100, 100) for e in range(1, 10)]
    ticks += [{**tick(e, 2, 200, 120), "members_running": 2} for e in range(10, 16)]
    ticks += [{**tick(e, 2, 200, 200), "members_running": 3} for e in range(16, 20)]
    rows = step_rows(PHASES, ticks, [], settle_s=2)
    assert [(r.label, r.members, round(r.achieved_rate)) for r in rows] == [
        ("1", 2, 100), ("2a", 2, 120), ("2b", 3, 200)]
    assert rows[2].seconds == 3  # 16..19 less the settle after the start at ~15.5 s


def synthetic_rows(tmp_path, **options):
    from results.rundir.manifest import read_manifest
    from results.rundir.tables import read_table
    from results.synthetic import write_run
    write_run(tmp_path / "run", **options)
    manifest = read_manifest(tmp_path / "run")
    rows = {table: sorted(read_table(tmp_path / "run", table).to_pylist(),
                          key=lambda r: r["elapsed_s"])
            for table in ("ticks", "members", "hosts", "agents")}
    return step_rows(manifest.phases, rows["ticks"], rows["members"], manifest.settle_s,
                     rows["hosts"], rows["agents"])


def test_delivery_balance_and_backlog_over_known_readings(tmp_path):
    from results.rundir.steps import jain_index
    one, two_a, two_b = synthetic_rows(tmp_path, unknown={38, 39, 40})
    # 2b spans 33-40; member 1's count is known over 33-37: its rate there, not a count cut
    assert two_b.unknown_per_member == {"surge-x-1@localhost": 3}
    assert two_b.balance_seconds == 8 - 3 and two_b.seconds == 8
    assert two_b.balance == pytest.approx(jain_index([1200, 800]))
    assert two_b.delivered_per_member == {"surge-x-0@localhost": 8400,
                                          "surge-x-1@localhost": 5600 - 3 * 800}
    assert one.max_backlog == 600 and one.reconnects == 0 and one.missing_seconds == 0
    assert two_b.missing_seconds == 3 and two_b.hosts_cpu_percent == {"broker-1": 30.0}
    assert one.p50_ms <= one.p95_ms <= one.p99_ms <= one.p999_ms <= one.max_ms


def test_the_first_format_balances_over_cpu(tmp_path):
    from results.rundir.steps import jain_index
    *_, two_b = synthetic_rows(tmp_path, format_version=1)
    assert two_b.delivered_per_member == {} and two_b.hosts_cpu_percent == {}
    assert two_b.balance == pytest.approx(jain_index([25.0, 15.0]))
    assert two_b.skipped == 0 and two_b.missing_seconds == 0  # columns format 1 lacked


def test_rows_carry_the_clients_and_the_cost_per_message_in_the_runs_terms():
    from results.rundir.steps import ROUND_TRIPS
    ticks = [{**tick(e, 1, 100, 1000), "sending": 6, "consuming": 2, "queues_in_use": 1}
             for e in range(1, 10)]
    ticks += [{**tick(e, 2, 200, 2000), "sending": 12 if e > 11 else 6, "consuming": 4,
               "queues_in_use": 2} for e in range(10, 20)]
    members = [{"elapsed_s": e, "member": "m-0@h", "running": True, "cpu_percent": 50.0}
               for e in range(20)]
    agents = [{"elapsed_s": e, "agent": a, "cpu_percent": 10.0} for e in range(20)
              for a in (0, 1)]
    first, second = step_rows(PHASES, ticks, members, settle_s=3, agents=agents)
    assert (first.senders, first.receivers, first.queues) == (6, 2, 1)
    assert (second.senders, second.receivers, second.queues) == (12, 4, 2)
    assert first.agents_cpu_percent == {"0": 10.0, "1": 10.0}
    # half a core at 1,000/s is 500 us each; two agents at 10% each: 200 us
    assert first.broker_us_per_msg == pytest.approx(500.0)
    assert first.member_us_per_msg == {"m-0@h": pytest.approx(500.0)}
    assert first.generator_us_per_msg == pytest.approx(200.0)
    assert second.broker_us_per_msg == pytest.approx(250.0)
    text = as_text([first, second], ROUND_TRIPS)
    header = text.splitlines()[0]
    for name in ("requesters", "responders", "queue pairs", "target round trips/s",
                 "broker CPU us/round trip", "generator CPU us/round trip"):
        assert name in header
    assert "msg/s" not in text
    cells = text.splitlines()[2].split()
    assert cells[:4] == ["2", "12", "4", "2"] and "250.0" in cells


def test_rows_of_runs_recorded_before_clients_were_counted_say_unknown():
    (row, _) = step_rows(PHASES, [tick(e, p, 100, 100) for p, span in ((1, range(1, 10)),
                                                                          (2, range(10, 20)))
                                   for e in span], [], settle_s=3)
    assert (row.senders, row.receivers, row.queues, row.generator_us_per_msg) == (
        None, None, None, None)
    assert as_text([row]).splitlines()[1].split()[1:4] == ["-", "-", "-"]


def test_memory_against_the_watermark_and_alarm_seconds_per_member():
    ticks = [tick(e, 1, 100, 100) for e in range(1, 10)]
    ticks += [tick(e, 2, 200, 200) for e in range(10, 20)]

    def member(e, name, percent, alarm):
        return {"elapsed_s": e, "member": name, "running": True, "cpu_percent": 10.0,
                "memory_percent_of_watermark": percent, "memory_alarm": alarm,
                "disk_alarm": False if percent is not None else None}
    members = [member(e, "m-0@h", 10.0 + e, e >= 15) for e in range(20)]
    members += [member(e, "m-1@h", None if e == 12 else 30.0, None if e == 12 else False)
                for e in range(20)]
    members += [{"elapsed_s": e, "member": "m-2@h", "running": False, "cpu_percent": None,
                 "memory_percent_of_watermark": 99.0, "memory_alarm": True}
                for e in range(20)]  # not serving: left out
    first, second = step_rows(PHASES, ticks, members, settle_s=3)
    assert first.memory_percent == {"m-0@h": 19.0, "m-1@h": 30.0}
    assert second.memory_percent == {"m-0@h": 29.0, "m-1@h": 30.0}
    assert first.memory_alarm_seconds == {"m-0@h": 0, "m-1@h": 0}
    assert second.memory_alarm_seconds == {"m-0@h": 5, "m-1@h": 0}  # seconds 15-19
    assert second.disk_alarm_seconds == {"m-0@h": 0, "m-1@h": 0}
    text = as_text([first, second]).splitlines()
    assert text[0].endswith("errors  m0 mem%  m1 mem%  mem alarm s")
    assert text[2].split()[-3:] == ["29.0", "30.0", "5"]
    assert "disk alarm s" not in text[0]


def test_a_table_without_memory_figures_has_no_memory_columns():
    ticks = [tick(e, 1, 100, 100) for e in range(1, 10)]
    members = [{"elapsed_s": e, "member": "m-0@h", "running": True, "cpu_percent": 40.0}
               for e in range(10)]
    rows = step_rows(PHASES[:1], ticks, members, settle_s=3)
    assert rows[0].memory_percent == {} and rows[0].memory_alarm_seconds == {}
    assert as_text(rows).splitlines()[0].endswith("errors")
