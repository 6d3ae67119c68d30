import pytest

from orchestrator.scaling.policy import Observation, decide, fired
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
