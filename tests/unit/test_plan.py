import re

import pytest
from pydantic import ValidationError

from orchestrator.specs.plan import duration, expand, phase_at
from orchestrator.specs.scenario import ScenarioSpec, StepSpec


def steps(*rows):
    return [StepSpec(rate_per_sender=r, hold=h, repeat=n) for r, h, n in rows]


@pytest.mark.parametrize("rows, rates, total", [
    ([(50, 20, 1), ("+50", 20, 3)], [50, 100, 150, 200], 80),
    ([(1, 10, 1), ("+115", 10, 11)], [1 + 115 * k for k in range(12)], 120),
    ([(100, 5, 1), ("-30", 5, 4)], [100, 70, 40, 10, 0], 25),
    ([("+10", 1, 2)], [10, 20], 2),
    ([(0, 30, 1)], [0], 30),
])
def test_expand(rows, rates, total):
    phases = expand(steps(*rows))
    assert [p.rate_per_sender for p in phases] == rates
    assert duration(phases) == total
    assert [p.index for p in phases] == list(range(1, len(rates) + 1))
    assert all(a.end_s == b.start_s for a, b in zip(phases, phases[1:]))


@pytest.mark.parametrize("elapsed, index", [(0, 1), (19.99, 1), (20, 2), (79.9, 4), (80, None)])
def test_phase_at(elapsed, index):
    phases = expand(steps((50, 20, 1), ("+50", 20, 3)))
    found = phase_at(phases, elapsed)
    assert (found.index if found else None) == index


def test_a_sweep_starts_receivers_count_for_count_and_they_stay():
    phases = expand([StepSpec.model_validate({"rate_per_sender": 0, "hold": 5,
                                              "senders": [6, 12], "receivers": [2, 4]}),
                     StepSpec.model_validate({"rate_per_sender": 0, "hold": 5})])
    assert [(p.senders, p.receivers) for p in phases] == [(6, 2), (12, 4), (None, None)]


@pytest.mark.parametrize("plan, problem", [
    ([{"rate_per_sender": 0, "hold": "5s", "senders": [1, 2], "receivers": [1, 2, 3]}],
     "a list of receivers goes with a list of senders of the same length"),
    ([{"rate_per_sender": 0, "hold": "5s", "senders": [1, 2], "receivers": [3, 5]}],
     "5 is more than the workload's 4 receivers"),
    ([{"rate_per_sender": 0, "hold": "5s", "receivers": 3},
      {"rate_per_sender": 0, "hold": "5s", "receivers": 2}],
     "receivers once started stay: the counts never fall (got [3, 2])"),
])
def test_receiver_counts_that_cannot_be_are_refused(plan, problem):
    with pytest.raises(ValidationError, match=re.escape(problem)):
        ScenarioSpec.model_validate({"name": "s", "topology": "t.yaml", "plan": plan,
                                     "workload": {"queue": "q", "senders": 2, "receivers": 4}})
