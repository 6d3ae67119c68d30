"""The backlog test of a plan step, followed second by second with made-up seconds: receivers
held until the backlog is built, senders at the drain's publish ratio after, the build and the
drain timed, a test cut short by its step said so."""

from types import SimpleNamespace

import pytest

from orchestrator.run.backlogs import BacklogTests
from orchestrator.specs import plan
from orchestrator.specs.scenario import ScenarioSpec


def phases(backlog: dict, hold: float = 30.0) -> list[plan.Phase]:
    spec = ScenarioSpec.model_validate({
        "name": "b", "topology": "t.yaml", "workload": {"queue": "q", "senders": 2,
                                                        "receivers": 2},
        "plan": ["100:5s", {"rate_per_sender": 100, "hold": hold, "backlog": backlog}]})
    return plan.expand(spec.plan)


def second(t: float, phase, backlog: int | None, received: int):
    return SimpleNamespace(elapsed_s=t, phase=phase, row={"backlog": backlog},
                           tick=SimpleNamespace(totals={"received": received}))


def test_a_backlog_is_built_with_receivers_held_then_drained_and_timed():
    said = []
    tests = BacklogTests(1000.0, lambda kind, **fields: said.append((kind, fields)))
    first, backlogged = phases({"bytes": "1MB", "drain_ratio": "90%", "publish_ratio": 0.5})
    assert not tests.holding(first) and tests.holding(backlogged)
    tests.on_tick(second(4, first, 0, 800))
    for t, backlog in ((5, 0), (6, 200), (9, 800), (10, 1000)):  # 1 MB at 1,000 B a message
        assert tests.holding(backlogged) and tests.rate_factor(backlogged) == 1.0
        tests.on_tick(second(t, backlogged, backlog, 800))
    assert not tests.holding(backlogged) and tests.rate_factor(backlogged) == 0.5
    tests.on_tick(second(11, backlogged, 500, 1400))
    tests.on_tick(second(12, backlogged, 100, 1900))  # 10 % of 1,000 left: drained
    (result,) = tests.results()
    assert (result.target_messages, result.built_messages, result.build_s, result.drain_s,
            result.drain_rate) == (1000, 1000, 5, 2, 550.0)
    assert [kind for kind, _ in said] == ["backlog_building", "backlog_built",
                                          "backlog_drained"]
    tests.on_tick(second(13, backlogged, 0, 2000))  # the rest of the step: nothing more
    assert len(said) == 3 and tests.rate_factor(backlogged) == 0.5


def test_a_backlog_the_step_cuts_short_is_said_unfinished_never_done():
    said = []
    tests = BacklogTests(2048.0, lambda kind, **fields: said.append((kind, fields)))
    _, backlogged = phases({"messages": 5000}, hold=3)
    for t in (5, 6, 7):
        tests.on_tick(second(t, backlogged, 100 * t, 0))
    tests.on_tick(second(8, None, 700, 0))  # the drain after the plan
    assert said[-1] == ("backlog_unfinished", {"step": 2, "part": "building", "seconds": 3})
    (result,) = tests.results()
    assert result.build_s is None and result.drain_s is None and result.drain_rate is None


@pytest.mark.parametrize("workload, step, said", [
    ({"ack": "auto"}, {"rate_per_sender": 10, "hold": 5, "backlog": {"messages": 10}},
     "workload.ack"),
    ({}, {"rate_per_sender": 0, "hold": 5, "backlog": {"messages": 10}},
     r"plan.0.backlog: unlimited senders \(rate 0\) stop at workload.max_backlog"),
    ({}, {"rate_per_sender": 10, "hold": 5, "backlog": {"messages": 10, "bytes": 10}},
     "give either messages or bytes"),
])
def test_a_backlog_test_that_cannot_work_is_refused(workload, step, said):
    with pytest.raises(ValueError, match=said):
        ScenarioSpec.model_validate({
            "name": "b", "topology": "t.yaml",
            "workload": {"queue": "q", "senders": 1, "receivers": 1, **workload},
            "plan": [step]})
