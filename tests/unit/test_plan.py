import pytest

from orchestrator.specs.plan import duration, expand, phase_at
from orchestrator.specs.scenario import StepSpec


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
