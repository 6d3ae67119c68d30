"""What the broker said it is (run.json ``broker``): the first line of the step table and the
report, and the page's badge; an emulator is said to be one everywhere."""

from __future__ import annotations

from orchestrator.web.feed import RunFeed
from results.report import headings_text
from results.rundir.manifest import BrokerRecord, FastPathRecord, RunManifest
from results.rundir.steps import as_text

EMULATED = BrokerRecord(product="IBM MQ", version="9.4.0.0", emulated=True,
                        description="EMULATED queue manager for tests, NOT IBM MQ")
LINE = ("Broker: emulated MQ (EMULATED queue manager for tests, NOT IBM MQ): its CPU and rates "
        "are the emulator's, not IBM MQ's")


def manifest(**fields) -> RunManifest:
    return RunManifest(run_id="r1", scenario={"name": "s"}, **fields)


def test_one_line_names_the_broker_and_an_emulator_loudly():
    assert EMULATED.line() == LINE
    assert BrokerRecord(product="IBM MQ", version="9.3.4.0").line() == "Broker: IBM MQ 9.3.4.0"


def test_the_broker_comes_first_in_the_step_table_and_the_report():
    both = manifest(broker=EMULATED, fast_path=FastPathRecord(on=True))
    assert both.headings() == [LINE, "AMQP fast path: on"]
    assert headings_text(both) == [LINE + ".", "", "AMQP fast path: on.", ""]
    assert manifest().headings() == [] and headings_text(manifest()) == []
    table = as_text([], heading="\n".join(both.headings()))
    assert table.splitlines()[:2] == [LINE, "AMQP fast path: on"]


def test_the_page_badges_the_broker_from_its_event():
    feed = RunFeed("r1", "s", 10.0)
    assert feed.since()["run"]["broker"] == "" and not feed.since()["run"]["emulated"]
    feed.event({"kind": "broker", "label": LINE.removeprefix("Broker: "), "emulated": True})
    assert feed.since()["run"]["broker"].startswith("emulated MQ (")
    assert feed.since()["run"]["emulated"] is True
