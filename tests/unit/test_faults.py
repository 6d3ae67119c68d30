"""The fault schedule's timing: when faults start, when load faults end, what they impose."""

import threading

from orchestrator.run.faults import FaultInjector
from orchestrator.specs.plan import expand
from orchestrator.specs.scenario import FaultSpec, StepSpec


def injector(*faults):
    phases = expand([StepSpec(rate_per_sender=10, hold=30), StepSpec(rate_per_sender=20,
                                                                     hold=30)])
    events = []
    schedule = FaultInjector([FaultSpec.model_validate(f) for f in faults], phases, None,
                             lambda kind, **fields: events.append((kind, fields)),
                             threading.Event())
    return schedule, events


def test_spike_and_slowdown_apply_for_their_duration_at_times_or_steps():
    schedule, events = injector(
        {"kind": "publish_spike", "at_step": 2, "duration": 10, "factor": 3},
        {"kind": "consumer_slowdown", "at": 5, "duration": 10, "delay": "30ms"})
    schedule.tick(4.9)
    assert schedule.spike_factor() == 1.0 and schedule.consumer_delay_s() is None
    schedule.tick(5.0)
    assert schedule.consumer_delay_s() == 0.03
    schedule.tick(15.0)
    assert schedule.consumer_delay_s() is None
    schedule.tick(30.0)
    assert schedule.spike_factor() == 3.0
    schedule.tick(40.0)
    assert schedule.spike_factor() == 1.0
    kinds = [(kind, fields.get("action")) for kind, fields in events]
    assert kinds == [("fault", "consumer_slowdown"), ("fault_cleared", "consumer_slowdown"),
                     ("fault", "publish_spike"), ("fault_cleared", "publish_spike")]
    assert events[2][1]["elapsed_s"] == 30.0


def test_overlapping_spikes_multiply():
    schedule, _ = injector({"kind": "publish_spike", "at": 1, "factor": 2},
                           {"kind": "publish_spike", "at": 2, "factor": 1.5})
    schedule.tick(2)
    assert schedule.spike_factor() == 3.0
