import pytest

from orchestrator.scaling.policy import Observation, decide, fired, value_of, window_value
from orchestrator.specs.scenario import ScalingSpec, Trigger

SPEC = ScalingSpec.model_validate({
    "pool": 4,
    "scale_out": {"when_any": [{"shortfall": "3%", "for": "5s"},
                               {"member_cpu": "90%", "for": "5s"},
                               {"queue_depth": 50000, "for": "3s"},
                               {"latency_p99": "200ms", "for": "3s"}],
                  "cooldown": "20s"},
    "scale_in": {"when_all": [{"member_cpu_below": "30%", "for": "10s"},
                              {"queue_depth_below": 1, "for": "10s"}],
                 "cooldown": "20s"},
})


def seconds(n, start=1, **fields):
    base = {"target_rate": 1000.0, "achieved_rate": 1000.0, "member_cpu": (0.5,),
            "queue_depth": 10, "p99_s": 0.01}
    base.update(fields)
    return [Observation(elapsed_s=float(start + i), **base) for i in range(n)]


def jitter(achieved):
    return [o for i, rate in enumerate(achieved) for o in seconds(1, start=i + 1,
                                                                   achieved_rate=rate)]


@pytest.mark.parametrize("history, expect", [
    (seconds(10), None),
    (seconds(5, achieved_rate=960.0), "shortfall"),           # 4% short for 5 s
    (seconds(4, achieved_rate=960.0), None),                  # not long enough
    (seconds(5, achieved_rate=975.0), None),                  # 2.5% short: under threshold
    (seconds(3) + seconds(4, start=4, achieved_rate=900.0), "shortfall"),  # most of the window
    (seconds(4) + seconds(1, start=5, achieved_rate=500.0), None),   # one bad second: a glitch
    (jitter([950.0, 985.0, 950.0, 985.0, 950.0]), "shortfall"),      # 5%/1.5%: mostly short
    (jitter([985.0, 950.0, 985.0, 950.0, 985.0]), None),             # mostly within 3%
    (seconds(5, member_cpu=(0.5, 0.95)), "member_cpu"),       # any member counts
    (seconds(3, queue_depth=60000), "queue_depth"),
    (seconds(3, p99_s=0.25), "latency_p99"),
    (seconds(1, p99_s=0.25) + seconds(2, start=2), None),     # one slow second
])
def test_scale_out_triggers(history, expect):
    decision = decide(SPEC, history, running=2, pool=4, minimum=1, last_action_s=None)
    assert (list(decision.values)[0] if decision else None) == expect
    if decision:
        assert decision.action == "out" and "for" in decision.triggers[0]


def test_any_reports_every_firing_trigger_with_values():
    history = seconds(5, achieved_rate=800.0, member_cpu=(0.97,), queue_depth=70000)
    decision = decide(SPEC, history, running=1, pool=4, minimum=1, last_action_s=None)
    assert set(decision.values) == {"shortfall", "member_cpu", "queue_depth"}
    assert decision.values["shortfall"] == pytest.approx(0.2)
    assert "shortfall=20%" in decision.describe()


@pytest.mark.parametrize("last_action, running, pool, expect", [
    (None, 2, 4, "out"),
    (0.0, 2, 4, None),        # cooldown: last action 10 s ago, 20 s needed
    (-15.0, 2, 4, "out"),     # 25 s ago
    (None, 4, 4, None),       # pool used up: max members respected
])
def test_cooldown_and_pool(last_action, running, pool, expect):
    history = seconds(10, achieved_rate=500.0)
    decision = decide(SPEC, history, running, pool, minimum=1, last_action_s=last_action)
    assert (decision.action if decision else None) == expect


@pytest.mark.parametrize("cpu, depth, running, expect", [
    ((0.1, 0.2), 0, 3, "in"),
    ((0.1, 0.4), 0, 3, None),     # all, not any: one member is busy
    ((0.1, 0.2), 5, 3, None),     # all: the queue is not empty
    ((0.1, 0.2), 0, 1, None),     # never below the minimum
])
def test_scale_in_needs_all(cpu, depth, running, expect):
    history = seconds(12, member_cpu=cpu, queue_depth=depth)
    decision = decide(SPEC, history, running, pool=4, minimum=1, last_action_s=None)
    assert (decision.action if decision else None) == expect


def test_zero_target_is_never_a_shortfall():
    trigger = Trigger.model_validate({"shortfall": "3%", "for": "2s"})
    assert not fired(trigger, seconds(5, target_rate=0.0, achieved_rate=0.0))


def test_trigger_needs_exactly_one_condition():
    with pytest.raises(ValueError, match="exactly one"):
        Trigger.model_validate({"shortfall": "3%", "member_cpu": "90%", "for": "2s"})
    with pytest.raises(ValueError, match="exactly one"):
        Trigger.model_validate({"for": "2s"})


def test_scale_in_needs_every_second_of_the_window_idle():
    idle = seconds(12, member_cpu=(0.1, 0.2), queue_depth=0)
    busy_second = seconds(1, start=13, member_cpu=(0.1, 0.5), queue_depth=0)
    after = seconds(4, start=14, member_cpu=(0.1, 0.2), queue_depth=0)
    assert decide(SPEC, idle, 3, pool=4, minimum=1, last_action_s=None).action == "in"
    assert decide(SPEC, idle + busy_second + after, 3, pool=4, minimum=1,
                  last_action_s=None) is None


def test_an_unknown_depth_never_satisfies_a_depth_condition():
    from orchestrator.scaling.policy import Observation, fired
    from orchestrator.specs.scenario import Trigger
    below = Trigger.model_validate({"queue_depth_below": 100, "for": "3s"})
    above = Trigger.model_validate({"queue_depth": 100, "for": "3s"})
    unknown = [Observation(elapsed_s=t, target_rate=1, achieved_rate=1, queue_depth=None)
               for t in range(3)]
    assert not fired(below, unknown) and not fired(above, unknown)
    mixed = unknown[:2] + [Observation(elapsed_s=3, target_rate=1, achieved_rate=1,
                                       queue_depth=500)]
    assert fired(above, mixed) and not fired(below, mixed)  # judged on the known second


# -- member CPU that is unknown in some seconds, or for some members -----------------------------

OUT = Trigger.model_validate({"member_cpu": "80%", "for": "30s"})
IN = Trigger.model_validate({"member_cpu_below": "30%", "for": "30s"})


def cpu_seconds(*members: dict[int, float], n: int = 30, names=("qm1", "qm2", "qm3")):
    """``n`` seconds in which member ``i`` has figure ``members[i][t]`` at second ``t`` only
    (unknown in every other second), as an exporter publishing now and then gives them."""
    return [Observation(elapsed_s=float(t), target_rate=1.0, achieved_rate=1.0,
                        member_cpu=tuple(m.get(t) for m in members),
                        members=names[:len(members)]) for t in range(n)]


def every(interval: int, value: float, first: int = 0, n: int = 30) -> dict[int, float]:
    return {t: value for t in range(first, n, interval)}


def test_a_figure_every_ten_seconds_is_judged_on_the_figures_not_on_the_empty_seconds():
    hot = cpu_seconds(every(10, 0.95))  # 3 figures in 30 s, 27 unknown seconds
    assert fired(OUT, hot) and not fired(IN, hot)
    idle = cpu_seconds(every(10, 0.10))
    assert fired(IN, idle) and not fired(OUT, idle)
    assert window_value(OUT, hot) == pytest.approx(0.95)


def test_one_known_figure_in_the_window_is_not_enough_either_way():
    assert not fired(OUT, cpu_seconds({5: 0.99}))
    assert not fired(IN, cpu_seconds({5: 0.01}))
    assert window_value(IN, cpu_seconds({5: 0.01})) is None
    one_second = Trigger.model_validate({"member_cpu": "80%", "for": "1s"})
    assert fired(one_second, cpu_seconds({0: 0.99}, n=1))  # a 1 s window: its one second


def test_no_known_cpu_at_all_never_fires_and_is_not_zero():
    unknown = cpu_seconds({}, {}, {})
    assert not fired(OUT, unknown) and not fired(IN, unknown)  # scale-in: not on ignorance
    assert value_of("member_cpu", unknown[0]) is None
    assert value_of("member_cpu_below", unknown[0]) is None
    nobody = [Observation(elapsed_s=float(t), target_rate=1.0, achieved_rate=1.0)
              for t in range(30)]
    assert not fired(OUT, nobody) and not fired(IN, nobody)


def test_queue_managers_publishing_at_their_own_seconds_are_judged_each_on_its_own():
    # qm1 is hot, qm2 and qm3 idle; their figures never arrive in the same second
    unaligned = cpu_seconds(every(10, 0.95, first=1), every(10, 0.2, first=4),
                            every(10, 0.2, first=7))
    assert fired(OUT, unaligned)  # the hot member is not outvoted by seconds of the others
    assert not fired(IN, unaligned)
    idle = cpu_seconds(every(10, 0.1, first=1), every(10, 0.2, first=4), every(10, 0.15, first=7))
    assert fired(IN, idle) and window_value(IN, idle) == pytest.approx(0.2)


def test_a_member_never_measured_keeps_capacity_but_does_not_hide_a_hot_one():
    # qm3 has no CPU figure at all (e.g. no metrics endpoint): the max over qm1 and qm2 is a
    # lower bound - above the threshold it is above it; below, qm3 may be busy
    hot = cpu_seconds(every(1, 0.95), every(1, 0.5), {})
    assert fired(OUT, hot)
    idle = cpu_seconds(every(1, 0.1), every(1, 0.1), {})
    assert not fired(IN, idle)
    assert value_of("member_cpu", idle[0]) == pytest.approx(0.1)  # what is known, a bound
    assert value_of("member_cpu_below", idle[0]) is None  # not all known: unknown
    assert fired(IN, cpu_seconds(every(1, 0.1), every(1, 0.1), every(15, 0.1)))


def test_a_busy_known_second_among_unknown_ones_stops_a_scale_in():
    figures = every(10, 0.1) | {25: 0.6}
    assert not fired(IN, cpu_seconds(figures))


def test_a_scale_in_decision_on_sparse_figures_reports_the_highest_known_figure():
    spec = ScalingSpec.model_validate({
        "pool": 4, "scale_in": {"when_any": [{"member_cpu_below": "30%", "for": "30s"}],
                                "cooldown": "20s"}})
    decision = decide(spec, cpu_seconds(every(10, 0.1), every(10, 0.25, first=3)), running=2,
                      pool=4, minimum=1, last_action_s=None)
    assert decision.action == "in" and decision.values == {"member_cpu_below": 0.25}
    assert "member_cpu_below=25%" in decision.describe()


def test_members_and_their_figures_must_match():
    with pytest.raises(ValueError, match="same members"):
        Observation(elapsed_s=0.0, target_rate=1.0, achieved_rate=1.0, member_cpu=(0.1,),
                    members=("a", "b"))
