"""Progress of long work without a terminal: a line as each stage begins, and one every
``every_s`` while it goes (fake time); with a terminal, rich bars and no plain lines."""

import io

from rich.console import Console

from orchestrator.cli.progress import StageProgress


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(terminal: bool = False):
    out = io.StringIO()
    clock = FakeClock()
    shown = StageProgress("analyse", Console(file=out, force_terminal=terminal, width=120),
                          every_s=10.0, clock=clock)
    return shown, out, clock


def test_plain_lines_say_each_stage_and_how_far_it_is_every_interval():
    shown, out, clock = progress()
    assert not shown.fancy
    shown.stage("reading the runs", 1000)
    assert out.getvalue() == "analyse: reading the runs (1,000)\n"
    shown.advance(250)
    clock.now += 9.9
    assert not shown.tell_if_due()
    clock.now += 0.1
    assert shown.tell_if_due()
    assert out.getvalue().splitlines()[-1] == "analyse: reading the runs 250/1,000 (10 s)"
    assert not shown.tell_if_due()  # said just now
    shown.stage("Spark job over 1,000 runs")
    clock.now += 25
    assert shown.tell_if_due()
    assert out.getvalue().splitlines()[-2:] == ["analyse: Spark job over 1,000 runs",
                                                "analyse: Spark job over 1,000 runs (25 s)"]


def test_nothing_is_said_before_a_stage_begins():
    shown, out, clock = progress()
    clock.now += 60
    assert not shown.tell_if_due() and out.getvalue() == ""


def test_a_terminal_gets_bars_that_leave_no_lines_behind():
    shown, out, clock = progress(terminal=True)
    assert shown.fancy
    with shown:
        shown.stage("reports and plots", 3)
        shown.advance(3)
        shown.stage("committing to the results lake")
    assert "analyse: committing" not in out.getvalue().replace("\x1b", "")[-200:]
    assert "analyse: reports and plots (3)\n" not in out.getvalue()


def test_a_capacity_search_says_the_time_left_at_the_pace_of_those_done():
    from orchestrator.capacity.runner import time_left
    assert time_left([], 4) == ""  # nothing timed yet: no guess
    assert time_left([60.0, 120.0], 3) == "; ~4m30s left"
    assert time_left([3600.0], 2) == "; ~2h00m left"
