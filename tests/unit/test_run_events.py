"""The run's events: commands a provisioner runs on hosts before the run directory is open
(asking whether members run) are kept and written first, in order, with their own times."""

import json

from orchestrator.clock import SYSTEM_CLOCK
from orchestrator.run.events import RunEvents
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.run.rundir import open_run_dir
from orchestrator.web.feed import RunFeed
from topologies.base import CommandResult


def command(text: str) -> CommandResult:
    return CommandResult("127.0.0.1", text, 0, "QMNAME(QM1) STATUS(Running)", "", 0.01)


def test_remote_commands_before_the_run_directory_are_written_first(tmp_path):
    events = RunEvents(RunFeed("r", "s", 10.0), ViewState(), LiveView(enabled=False),
                       SYSTEM_CLOCK)
    events.remote_command(command("dspmq -m QM1"))
    events.remote_command(command("dspmq -m QM2"))
    writer = open_run_dir(tmp_path / "runs", tmp_path / "runs" / "r")
    events.open(writer)
    events.remote_command(command("strmqm QM1"))
    events("step", step=1)
    writer.close()
    written = [json.loads(line) for line in
               (tmp_path / "runs" / "r" / "events.jsonl").read_text().splitlines()]
    assert [(e["kind"], e.get("command")) for e in written] == [
        ("remote_command", "dspmq -m QM1"), ("remote_command", "dspmq -m QM2"),
        ("remote_command", "strmqm QM1"), ("step", None)]
    assert written[0]["t"] <= written[1]["t"] <= written[2]["t"]
    assert written[0]["stdout"] == "QMNAME(QM1) STATUS(Running)"
