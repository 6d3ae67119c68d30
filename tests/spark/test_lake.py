"""The results lake with real local Spark: what it holds, a crash before its commit, two
analyses at once, schema versions, ``surge query``."""

import threading

import pyarrow.parquet as pq
import pytest

from results import lake
from results.analysis import analyze_run
from results.lake import Lake
from results.pipeline import analyze
from results.query import as_csv, query
from results.rundir.manifest import read_manifest
from results.rundir.steps import FIGURES, drain_row, step_rows
from results.rundir.tables import read_table
from results.synthetic import write_run


def quiet(_line):
    """Drop progress lines."""


def controller_rows(run_dir):
    """The step table the controller makes of what the run recorded."""
    manifest = read_manifest(run_dir)
    rows = {table: sorted(read_table(run_dir, table).to_pylist(), key=lambda r: r["elapsed_s"])
            for table in ("ticks", "members", "hosts", "agents")}
    steps = step_rows(manifest.phases, rows["ticks"], rows["members"], manifest.settle_s,
                      rows["hosts"], rows["agents"])
    drain = drain_row(manifest.phases, rows["ticks"], rows["members"], rows["hosts"],
                      rows["agents"])
    return steps + ([drain] if drain else [])


def runs(root, *specs):
    """Synthetic runs under ``root``, one per (name, options of write_run)."""
    for name, options in specs:
        write_run(root / name, **options)
    return [root / name for name, _ in specs]


def test_the_lake_holds_every_runs_step_table_members_cost_and_events(spark, tmp_path):
    dirs = runs(tmp_path, ("a", {"drain_s": 5, "unknown": {5, 6, 38}}),
                ("b", {"seed": 2, "format_version": 2}), ("c", {"seed": 3, "compacted": False}))
    summary = analyze(dirs, say=quiet)
    assert sorted(summary.analysed) == sorted(d.resolve() for d in dirs), summary.failed
    steps = spark.read.parquet(str(Lake(tmp_path).table("steps"))).collect()
    for run_dir in dirs:
        mine = sorted((r.asDict() for r in steps if r.run_id == run_dir.name),
                      key=lambda r: r["start_s"])
        want = controller_rows(run_dir)
        assert [r["label"] for r in mine] == [w.label for w in want]
        for row, expected in zip(mine, want):
            for name in FIGURES:
                got = row[name]
                assert (dict(got) if isinstance(got, dict) else got) == \
                    pytest.approx(getattr(expected, name)), (run_dir.name, row["label"], name)
            assert row["schema_version"] == lake.SCHEMA_VERSION
    # the compacted run was compacted when analysed, and is read from one file per table
    assert [p.name for p in (dirs[2] / "metrics" / "ticks").iterdir()] == ["compacted.parquet"]
    cost = {r["run_id"]: r for r in lake.read(Lake(tmp_path), "cost").to_pylist()}
    members = lake.read(Lake(tmp_path), "members").to_pylist()
    alone = analyze_run(spark, dirs[0], 0.04).cost  # the figures test_analysis checks by hand
    assert cost["a"]["broker_cpu_s"] == pytest.approx(alone["broker_cpu_s"])
    assert cost["a"]["broker_cost_per_1k_msg_s_month"] == \
        pytest.approx(alone["broker_cost_per_1k_msg_s_month"])
    assert {m["run_id"] for m in members} == {"a", "b", "c"}
    events = lake.read(Lake(tmp_path), "events").to_pylist()
    assert [e["kind"] for e in events if e["run_id"] == "a"] == ["step"]
    latency = [r for r in lake.read(Lake(tmp_path), "latency").to_pylist()
               if r["run_id"] == "a" and r["label"] == "1" and r["histogram"] == "latency"]
    assert sum(r["count"] for r in latency) == 500 * 16  # 18 steady seconds, 5 and 6 unknown
    assert all(r["lower_us"] < r["upper_us"] for r in latency)
    # a pass with nothing new commits nothing; a changed run replaces its rows
    generation = Lake(tmp_path).state()["generation"]
    assert analyze(dirs, say=quiet).skipped == [d.resolve() for d in dirs]
    assert Lake(tmp_path).state()["generation"] == generation
    write_run(dirs[1], seed=5)
    assert analyze(dirs, say=quiet).analysed == [dirs[1].resolve()]
    rows = lake.read(Lake(tmp_path), "steps").to_pylist()
    assert sorted(r["run_id"] for r in rows).count("b") == len(controller_rows(dirs[1]))


def test_a_crash_between_staging_and_commit_leaves_the_previous_lake(spark, tmp_path,
                                                                      monkeypatch):
    first, second = runs(tmp_path, ("first", {}), ("second", {"seed": 2}))
    analyze([first], say=quiet)
    before = lake.read(Lake(tmp_path), "steps").to_pylist()
    commit = Lake.commit

    def crash():
        raise KeyboardInterrupt  # Ctrl-C, or a kill, between staging and the switch

    monkeypatch.setattr(Lake, "commit",
                        lambda self, rows, prints: commit(self, rows, prints, before_switch=crash))
    with pytest.raises(KeyboardInterrupt):
        analyze([first, second], say=quiet)
    assert lake.read(Lake(tmp_path), "steps").to_pylist() == before
    assert set(Lake(tmp_path).fingerprints()) == {"first"}
    assert pq.read_table(Lake(tmp_path).table("runs")).column("run_id").to_pylist() == ["first"]
    monkeypatch.undo()
    assert analyze([first, second], say=quiet).analysed == [second.resolve()]
    assert set(Lake(tmp_path).fingerprints()) == {"first", "second"}
    assert not list((tmp_path / "_lake").glob(".staging-*"))


def test_two_analyses_at_once_each_run_lands_once(spark, tmp_path):
    dirs = runs(tmp_path, *[(f"r{i}", {"seed": i}) for i in range(4)])
    summaries = []
    threads = [threading.Thread(target=lambda: summaries.append(analyze(dirs, say=quiet)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert len(summaries) == 2 and not any(s.failed for s in summaries)
    assert sorted(d for s in summaries for d in s.analysed) == sorted(d.resolve() for d in dirs)
    ids = lake.read(Lake(tmp_path), "runs").column("run_id").to_pylist()
    assert sorted(ids) == [d.name for d in dirs]


def test_an_older_schema_versions_partitions_stay_readable(spark, tmp_path, monkeypatch):
    old, _ = runs(tmp_path, ("old", {}), ("new", {"seed": 2}))
    analyze([old], say=quiet)
    import pyarrow as pa
    monkeypatch.setattr(lake, "SCHEMA_VERSION", lake.SCHEMA_VERSION + 1)
    monkeypatch.setitem(lake.TABLES, "cost", lake.TABLES["cost"].append(
        pa.field("currency", pa.string())))
    Lake(tmp_path).commit({"cost": [{"run_id": "new", "messages": 1, "currency": "EUR"}]},
                          {"new": "fingerprint"})
    assert Lake(tmp_path).state()["schema_version"] == lake.SCHEMA_VERSION
    rows = {r.run_id: r for r in spark.read.option("mergeSchema", "true")
            .parquet(str(Lake(tmp_path).table("cost"))).collect()}
    assert rows["old"].schema_version == lake.SCHEMA_VERSION - 1 and rows["old"].currency is None
    assert rows["new"].schema_version == lake.SCHEMA_VERSION and rows["new"].currency == "EUR"
    assert rows["old"].messages == 56_000 and rows["new"].messages == 1


def test_query_answers_sql_over_the_lake_and_names_bad_sql(spark, tmp_path):
    dirs = runs(tmp_path, ("a", {}), ("b", {"seed": 2, "format_version": 1}))
    analyze(dirs, say=quiet)
    columns, rows = query(tmp_path, "SELECT run_id, count(*) AS steps FROM steps "
                                    "WHERE label != 'drain' GROUP BY run_id ORDER BY run_id")
    assert columns == ["run_id", "steps"] and rows == [("a", 3), ("b", 3)]
    assert as_csv(columns, rows) == "run_id,steps\na,3\nb,3\n"
    from orchestrator.errors import SurgeError
    with pytest.raises(SurgeError, match="query: .*no_such_table"):
        query(tmp_path, "SELECT * FROM no_such_table")
    with pytest.raises(SurgeError, match="no results lake yet"):
        query(tmp_path / "elsewhere", "SELECT 1")
