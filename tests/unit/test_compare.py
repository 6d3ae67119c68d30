"""The run comparison (Table 2 shape) reads finished runs and names what it cannot read."""


import pytest

from orchestrator.errors import SurgeError
from results.compare import as_text, final_step, ranking_text, statistics_text
from results.lake import Lake
from results.rundir.manifest import RunManifest


def _run(tmp_path, name, steps, accounting):
    run_dir = tmp_path / name
    run_dir.mkdir()
    RunManifest(run_id=name, scenario={"name": name}, steps=steps,
                accounting=accounting and {"sent": 1, "received": 1, **accounting}
                ).write(run_dir)
    return run_dir


def _step(target, achieved, members, cpu):
    return {"step": 1, "label": "1", "target_rate": target, "achieved_rate": achieved,
            "min_rate": achieved, "sent_rate": target, "received_rate": achieved,
            "members": members, "cpu_percent": {f"m{i}": c for i, c in enumerate(cpu)},
            "host_cpu_percent": 70.0, "p50_ms": 1.0, "p99_ms": 9.5, "errors": 0,
            "seconds": 30, "ratio": achieved / target}


def test_each_run_is_read_at_its_final_step(tmp_path):
    ramp = _run(tmp_path, "ramp", [_step(1800, 1800, 1, [25.0]), _step(3600, 3500, 2, [25, 23])],
                {"balanced": True})
    fixed = _run(tmp_path, "fixed", [_step(3600, 3000, 4, [10, 20, 30, 40])],
                 {"balanced": False, "lost": 12})
    name, row, verdict = final_step(ramp)
    assert (name, row.target_rate, row.members, verdict) == ("ramp", 3600, 2, "balanced")
    lines = as_text([ramp, fixed]).splitlines()
    assert lines[1].split() == ["ramp", "3,600", "3,500", "2", "24.0", "70.0", "9.50", "balanced"]
    assert lines[2].split()[-2:] == ["lost", "12"] and lines[2].split()[4] == "25.0"


def test_a_directory_without_a_finished_run_is_named(tmp_path):
    with pytest.raises(SurgeError, match="run.json: not found"):
        final_step(tmp_path)
    broken = _run(tmp_path, "crashed", [], None)
    with pytest.raises(SurgeError, match="crashed/run.json: no step table"):
        final_step(broken)


def _analysed(tmp_path, name, target, achieved, cost):
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True)
    Lake(tmp_path).commit({
        "steps": [{"run_id": name, "label": "1", "start_s": 0.0, "target_rate": target,
                   "achieved_rate": achieved, "p99_ms": 10.0, "members": 2}],
        "cost": [{"run_id": name, "broker_us_per_msg": cost, "generator_us_per_msg": 50.0,
                  "broker_cost_per_1k_msg_s_month": None if cost is None else cost / 10}]},
        {name: "fingerprint"})
    return run_dir


def test_statistics_and_ranking_across_analysed_runs(tmp_path):
    runs = [_analysed(tmp_path, "a", 1000, 1000, 100.0), _analysed(tmp_path, "b", 1000, 900, 50.0),
            _analysed(tmp_path, "c", 1000, 990, 80.0)]
    achieved = next(line for line in statistics_text(runs).splitlines()
                    if "achieved msg/s" in line).split()[-6:]
    assert achieved == ["3", "963.33", "55.08", "900.00", "1,000.00", "-1.0"]
    ranking = [line.split()[1] for line in ranking_text(runs).splitlines()[1:]]
    assert ranking == ["c", "a"]  # b missed its target by 10%; c is cheaper than a


def test_unknown_figures_are_shown_as_unknown(tmp_path):
    blind = _run(tmp_path, "blind", [{**_step(3600, 3500, 2, [25, 23]), "achieved_rate": None,
                                      "host_cpu_percent": None, "p99_ms": None}],
                 {"balanced": True})
    assert as_text([blind]).splitlines()[1].split() == [
        "blind", "3,600", "-", "2", "24.0", "-", "-", "balanced"]


def test_a_run_whose_cost_is_unknown_is_listed_but_not_ranked(tmp_path):
    runs = [_analysed(tmp_path, "a", 1000, 1000, 100.0),
            _analysed(tmp_path, "k8s", 1000, 1000, None),  # members' CPU not measured
            _analysed(tmp_path, "c", 1000, 990, 80.0),
            _analysed(tmp_path, "gap", 1000, None, 10.0)]  # achieved rate unknown: not met
    lines = [line.split() for line in ranking_text(runs).splitlines()[1:]]
    assert [line[:2] for line in lines] == [["1", "c"], ["2", "a"], ["-", "k8s"]]
    assert lines[-1][-2:] == ["cost", "unknown"]  # never ranked as free
    broker = statistics_text(runs).split("broker CPU us/msg")[1].split()
    assert broker[0] == "3"  # of 4 runs: the unknown cost is left out, not counted as 0
