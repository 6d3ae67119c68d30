"""The terminal view tells the truth at a glance: achieved is end to end, the lag and both
percentiles are there, draining does not read as a target met, and work before the load says
what it is and for how long."""

import io
import re
import time

from rich.console import Console

from orchestrator.run.liveview import LiveView, ViewState, achieved, plain_line, render, sparkline


def shown(state: ViewState) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(render(state))
    return console.file.getvalue()


def running(**changes) -> ViewState:
    state = ViewState(scenario="s", run_id="r", step=2, steps=4, elapsed_s=30, planned_s=80,
                      target_rate=1000.0, send_rate=1000.0, receive_rate=700.0, backlog=9000,
                      queue_depth=8800, p50_ms=3.5, p99_ms=120.0, members_running=3,
                      phase="running")
    state.__dict__.update(changes)
    return state


def test_achieved_is_what_consumers_received_against_the_target():
    state = running()
    assert achieved(state) == 0.7  # publishers kept up; the consumers did not
    text = shown(state)
    assert "70.0%" in text and "9,000" in text and "3.5" in text and "120.0" in text
    line = plain_line(state)
    assert "achieved 70.0%" in line and "in flight 9,000" in line and "p50 3.5 ms" in line


def test_draining_is_not_a_target_met():
    state = running(phase="draining", target_rate=0.0, send_rate=0.0, receive_rate=650.0)
    assert achieved(state) is None
    row = next(line for line in shown(state).splitlines() if line.lstrip().startswith("2/4"))
    assert "stopped" in row and "draining" in row and "%" not in row
    assert "senders stopped" in plain_line(state) and "target 0" not in plain_line(state)


def test_the_last_minute_is_drawn():
    assert sparkline([0, 50, 100]) == "▁▄█"
    assert sparkline([None, 10.0]) == " █"
    assert len(sparkline(range(200))) == 60
    state = running()
    state.received_history.extend([100.0, 200.0, 300.0])
    assert re.search(r"received, last minute \S+\s+peak 300 msg/s", shown(state))


def test_work_before_the_load_says_what_and_how_long(capsys):
    view = LiveView(enabled=True, plain_every_s=0.05)  # not a terminal: lines on stderr
    state = ViewState(scenario="s", run_id="r1")
    with view.waiting(state, "provisioning it3: 3 of 4 members"):
        assert "provisioning it3: 3 of 4 members (0 s)" in shown(state)
        time.sleep(0.2)
    assert state.waiting_since is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2 and all(line.startswith("[r1] provisioning it3") for line in lines)


def test_a_steps_first_second_is_judged_against_the_rate_asked_over_it():
    # the rates of a tick were measured over the second before it, at the old target
    state = running(target_rate=2000.0, measured_target=1000.0, receive_rate=1000.0)
    assert achieved(state) == 1.0 and "100.0%" in shown(state)
    # and the line says which target that is, beside the new one
    assert "target 1,000 -> 2,000 msg/s  achieved 100.0%" in plain_line(state)
    assert "target 2,000 msg/s" in plain_line(running(target_rate=2000.0,
                                                      measured_target=2000.0))
