import pytest

from drivers.histogram import LatencyHistogram
from orchestrator.sampling import TickMath
from topologies.base import BrokerSample, MemberSample


def snap(sent, received, latencies=()):
    histogram = LatencyHistogram()
    for value in latencies:
        histogram.record(value)
    return {"sent": sent, "received": received, "confirmed": 0, "errors": 0, "reconnects": 0,
            "connections": 2, "latency": histogram.to_dict()}


def broker(cpu):
    return BrokerSample([MemberSample("m0", cpu is not None, cpu, 0.5)], {"q": 0})


def test_rates_from_cumulative_counters_across_agents():
    math = TickMath()
    math.step(1.0, [snap(100, 90), snap(100, 100)], broker(1.0), {0: 1.0})
    tick = math.step(3.0, [snap(500, 400, [1000, 2000]), snap(300, 300, [3000])],
                     broker(2.0), {0: 1.5})
    assert tick.rates["sent"] == pytest.approx((800 - 200) / 2)
    assert tick.rates["received"] == pytest.approx((700 - 190) / 2)
    assert tick.member_cpu_percent["m0"] == pytest.approx(50.0)
    assert tick.agent_cpu_percent[0] == pytest.approx(25.0)
    assert tick.latency.count == 3
    assert tick.totals["connections"] == 4


def test_stopped_member_has_no_cpu_figure():
    math = TickMath()
    math.step(1.0, [snap(0, 0)], broker(1.0), {})
    assert math.step(2.0, [snap(0, 0)], broker(None), {}).member_cpu_percent["m0"] is None
    assert math.step(3.0, [snap(0, 0)], broker(5.0), {}).member_cpu_percent["m0"] is None
