"""The source documents' tables from recorded runs: their columns, one row per what the
document has a row for, the run's figures in the cells, "-" for what was not recorded."""

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import SurgeError
from results.documents import TABLES, document_table
from results.rundir.manifest import RunManifest
from results.rundir.steps import StepRow


def write_run(root, name, steps, pattern="request-reply", message=None):
    run_dir = root / name
    run_dir.mkdir(parents=True)
    RunManifest(run_id=name, scenario={
        "name": name, "workload": {"pattern": pattern,
                                   "message": message or {"size": "2KiB"}}},
                steps=steps).write(run_dir)
    return run_dir


def step(index, requesters, pairs, rate, member_cpu, agent_cpu, **more):
    return StepRow(step=index, label=str(index), received_rate=rate, sent_rate=rate,
                   achieved_rate=rate, senders=requesters, receivers=2 * pairs, queues=pairs,
                   members=1, cpu_percent={"m-0@h": member_cpu},
                   agents_cpu_percent={"0": agent_cpu}, host_cpu_percent=50.0, **more)


@pytest.fixture
def runs(tmp_path):
    single = write_run(tmp_path, "single", [step(1, 6, 1, 1000.0, 50.0, 20.0),
                                            step(2, 12, 2, 2000.0, 80.0, 40.0)])
    native = write_run(tmp_path, "native-ha", [step(1, 6, 1, 500.0, 50.0, 10.0)])
    (tmp_path / "_lake").mkdir()  # beside runs, passed over
    return [single, native, tmp_path / "_lake"]


def test_round_trips_per_requester_count_with_a_column_pair_per_run(runs):
    table = document_table("003-round-trips", runs)
    assert table.header == ["requesters", "single round trips/s", "single broker CPU%",
                            "native-ha round trips/s", "native-ha broker CPU%"]
    assert table.rows == [["6", "1,000", "50.0", "500", "50.0"],
                          ["12", "2,000", "80.0", "-", "-"]]


def test_cost_per_transaction_as_queue_pairs_grow(runs):
    table = document_table("004-cost", runs)
    assert table.header[:5] == ["queue pairs", "single transactions/s",
                                "single broker CPU us/tx",
                                "single requesters+servers CPU us/tx", "single total CPU us/tx"]
    # half a core at 1,000 round trips/s: 500 us each; the agent's 20%: 200 us
    assert table.rows[0][:5] == ["1", "1,000", "500.0", "200.0", "700.0"]
    assert table.rows[1][:5] == ["2", "2,000", "400.0", "200.0", "600.0"]
    assert table.rows[1][5:] == ["-"] * 4  # native-ha never had 2 pairs


def test_cphtestp_rows_name_what_is_not_measured(tmp_path, runs):
    table = document_table("003-results", runs[:1])
    assert table.header == ["run", "persistent", "msgsize bytes", "threads",
                            "rate round trips/s", "cpu %", "readMB", "writeMB", "recvGbs",
                            "sendGbs", "qmcpu %"]
    # a run recorded without the members' traffic leaves the network unknown too
    assert table.rows[0] == ["single", "false", "2048", "6", "1,000", "50.00", "-", "-", "-", "-",
                             "50.00"]
    assert table.notes[-1] == 'not measured here ("-"): readMB, writeMB'
    # the clients receive what the members send them: 3 Gb/s out of two members is recvGbs
    traffic = write_run(tmp_path / "more", "traffic", [step(
        1, 6, 1, 1000.0, 50.0, 20.0, network_in_mbps={"m-0@h": 400.0, "m-1@h": 600.0},
        network_out_mbps={"m-0@h": 1000.0, "m-1@h": 2000.0})])
    assert document_table("003-results", [traffic]).rows[0][8:10] == ["3.000", "1.000"]


def test_uniform_tables_take_each_broker_hosts_cpu(tmp_path):
    hosts = {"10.0.0.1": 40.0, "10.0.0.2": 5.5}
    run = write_run(tmp_path, "scaling", [
        StepRow(step=1, label="1a", target_rate=20700, achieved_rate=20700, members=1,
                hosts_cpu_percent=hosts),
        StepRow(step=1, label="1b", target_rate=41400, achieved_rate=21070, members=1,
                hosts_cpu_percent=hosts)], pattern="send-receive")
    table = document_table("000-table1", [run])
    assert table.header == ["Target Rate msg/s", "Rate Achieved msg/s", "#members",
                            "10.0.0.1 CPU%", "10.0.0.2 CPU%"]
    assert table.rows[1] == ["41,400", "21,070", "1", "40.00", "5.50"]
    (row,) = document_table("000-table2", [run]).rows
    assert row == ["scaling", "21,070", "1", "40.00", "5.50"]


def test_unknown_table_or_unfinished_run_is_one_clear_line(tmp_path, runs):
    with pytest.raises(SurgeError, match="expected one of 000-table1"):
        document_table("nope", runs)
    unfinished = write_run(tmp_path, "unfinished", [])
    with pytest.raises(SurgeError, match="unfinished/run.json: no step table"):
        document_table("000-table1", [unfinished])


def test_surge_table_lists_prints_and_answers_json(runs):
    runner = CliRunner()
    listed = runner.invoke(app, ["table"])
    assert listed.exit_code == 0 and all(name in listed.output for name in TABLES)
    printed = runner.invoke(app, ["table", "004-split", *map(str, runs)])
    assert printed.exit_code == 0, printed.output
    assert "member m-0@h" in printed.output and "CHIN(s)" in printed.output
    answered = runner.invoke(app, ["table", "003-round-trips", *map(str, runs), "--json"])
    assert json.loads(answered.output)[0]["single round trips/s"] == "1,000"


def test_the_documents_figures_are_drawn_from_the_same_runs(runs, tmp_path):
    from results.documents import plot_table
    written = plot_table("004-cost", runs, tmp_path / "plots")
    assert [p.name for p in written] == ["004-cost.png", "004-rate.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
    assert plot_table("000-table2", runs, tmp_path / "none") == []


def test_a_campaign_cell_is_named_by_its_parameters():
    from results.documents import label
    assert label("001-sweep-topology=local-1-r1", "sweep") == "topology=local-1"
    assert label("004-sweep-cpu_per_member=0.5-r2", "sweep") == "cpu_per_member=0.5-r2"
    assert label("002-sweep-r1", "sweep") == "sweep"
    assert label("20261126T194230Z-sweep", "sweep") == "20261126T194230Z-sweep"


def test_002_spread_per_queue_instance_and_the_sequence_of_destinations(tmp_path):
    rows = [StepRow(step=1, label="1", delivered_per_member={"QM1": 300, "QM2": 300, "QM3": 400},
                    balance=0.98)]
    fixed = tmp_path / "bind-on-open"
    fixed.mkdir()
    RunManifest(run_id="on-open", scenario={"name": "on-open", "workload": {}}, steps=rows,
                destinations={"QM1": 1000}, destination_sequence=["QM1"] * 24).write(fixed)
    moving = tmp_path / "not-fixed"
    moving.mkdir()
    RunManifest(run_id="not-fixed", scenario={"name": "not-fixed", "workload": {}}, steps=rows,
                destinations={"QM1": 334, "QM2": 333, "QM3": 333},
                destination_sequence=["QM1", "QM2", "QM3"] * 8).write(moving)
    table = document_table("002-spread", [fixed, moving])
    assert table.header == ["run", "step", "balance", "QM1 delivered", "QM2 delivered",
                            "QM3 delivered"]
    assert table.rows[0][2:] == ["0.980", "300 (30.0%)", "300 (30.0%)", "400 (40.0%)"]
    notes = table.notes
    assert any(n.endswith("resolved to, over the run: QM1 1,000 (100.0%)") for n in notes)
    assert any(n.endswith("the first 24 puts (the first agent's senders, in the order they "
                          "put) went to " + " ".join(["QM1", "QM2", "QM3"] * 8))
               for n in notes)


def test_004_split_names_each_part_of_linked_clusters(tmp_path):
    a, b = "surge-l-a-0@localhost", "surge-l-b-0@localhost"
    row = StepRow(step=1, label="1", received_rate=1000.0, sent_rate=1000.0,
                  achieved_rate=1000.0, senders=6, receivers=2, queues=1, members=2,
                  cpu_percent={a: 30.0, b: 50.0}, agents_cpu_percent={"0": 10.0, "1": 12.0},
                  host_cpu_percent=90.0)
    run_dir = tmp_path / "linked"
    run_dir.mkdir()
    RunManifest(run_id="linked", scenario={"name": "linked",
                                           "workload": {"pattern": "request-reply"}},
                steps=[row], link={"sides": [[a], [b]], "runs_in": b,
                                   "shovels": {"surge-pair-1": "running"}},
                agent_roles={"0": "senders", "1": "receivers"}).write(run_dir)
    table = document_table("004-split", [run_dir])
    # CPU % of a core over 1,000 round trips/s: 10 us per percent
    assert table.rows == [[f"broker A: member {a}", "300.00"],
                          [f"broker B + link: member {b}", "500.00"],
                          ["agent 0 (requesters)", "100.00"], ["agent 1 (responders)", "120.00"],
                          ["total", "1,020.00"]]
    assert any(f"runs inside {b}" in note for note in table.notes)
    assert not any("both kinds" in note for note in table.notes)


def test_004_split_gives_agents_that_ran_other_workers_rows_of_their_own(tmp_path, runs):
    linked = tmp_path / "linked"
    linked.mkdir()
    RunManifest(run_id="linked", scenario={"name": "linked",
                                           "workload": {"pattern": "request-reply"}},
                steps=[step(1, 6, 1, 1000.0, 50.0, 20.0)],
                agent_roles={"0": "senders"}).write(linked)
    table = document_table("004-split", [runs[0], linked])
    assert [row[0] for row in table.rows] == ["member m-0@h", "agent 0",
                                              "agent 0 (requesters)", "total"]
    assert [row[1:] for row in table.rows[1:3]] == [["200.00", "-"], ["-", "200.00"]]


def test_cells_of_one_scenario_that_would_share_a_label_are_named_by_their_directories(
        tmp_path):
    cells = []
    for name, cpu in (("002-linked-r1", 20.0), ("003-linked-r1", 30.0)):
        cells.append(tmp_path / name)
        cells[-1].mkdir()
        RunManifest(run_id=name, scenario={"name": "linked",
                                           "workload": {"pattern": "request-reply"}},
                    steps=[step(1, 6, 1, 1000.0, 50.0, cpu)]).write(cells[-1])
    table = document_table("004-split", cells)
    assert table.header == ["CPU us per transaction", "002-linked-r1", "003-linked-r1"]
    assert table.rows[1] == ["agent 0", "200.00", "300.00"]  # each its own run's figure
