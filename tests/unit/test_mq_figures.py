"""Queue manager figures from mq_prometheus scrapes on a fake clock: a CPU figure counts once,
over the real interval since the previous one, with its age; between publications and after a
gap it is unknown, never the last figure again; MQI counts add up; the rows carry the age."""

from __future__ import annotations

import pytest

from orchestrator.run.rows import member_rows
from orchestrator.run.sampling import TickMath
from tests.fakes import FakeClock
from topologies.mq import metrics
from topologies.mq.figures import PublishedFigures

QM = "UC01QM01"


def exposition(cpu_of_host: float | None = None, puts: int | None = None,
               gets: int | None = None, connections: int = 7, publications: int | None = None,
               depth: int = 3) -> str:
    """What mq_prometheus serves: status figures every scrape, published ones only after a
    publication (the exporter clears them at each scrape)."""
    lines = [f'ibmmq_qmgr_connection_count{{qmgr="{QM}",platform="UNIX"}} {connections}',
             f'ibmmq_queue_depth{{qmgr="{QM}",queue="REQUEST",usage="NORMAL"}} {depth}']
    if cpu_of_host is not None:
        half = cpu_of_host / 2
        lines += [f'ibmmq_qmgr_user_cpu_time_estimate_for_queue_manager_percentage'
                  f'{{qmgr="{QM}",platform="UNIX"}} {half}',
                  f'ibmmq_qmgr_system_cpu_time_estimate_for_queue_manager_percentage'
                  f'{{qmgr="{QM}",platform="UNIX"}} {half}']
    if puts is not None:
        lines.append(f'ibmmq_qmgr_interval_mqput_mqput1_total_count{{qmgr="{QM}"}} {puts}')
    if gets is not None:
        lines.append(f'ibmmq_qmgr_interval_destructive_get_total_count{{qmgr="{QM}"}} {gets}')
    if publications is not None:
        lines.append(f'ibmmq_qmgr_exporter_publications{{qmgr="{QM}"}} {publications}')
    return "\n".join(lines) + "\n"


def scrape(**figures) -> metrics.ExporterReading:
    return metrics.read(exposition(**figures), QM)


def test_a_figure_counts_once_over_the_real_publication_interval_with_its_age():
    clock, math = FakeClock(), TickMath()
    figures = PublishedFigures(interval_s=10.0, host_cpus=4)
    seen = []
    # 1 Hz scrapes; a publication every 10 s: 25% of a 4-core host = one core
    for second in range(31):
        published = second % 10 == 5
        reading = scrape(cpu_of_host=25.0 if published else None,
                         publications=1 if published else 0)
        got = figures.observe(reading, clock.monotonic())
        tick = math.step(second, {}, [_sample(got)])
        seen.append((tick.member_cpu_percent["m"], tick.member_cpu_interval_s["m"],
                     got.cpu_age_s))
        clock.advance(1.0)
    known = [(s, cpu, interval, age) for s, (cpu, interval, age) in enumerate(seen)
             if cpu is not None]
    # the first figure starts the series; each next one is 100% of a core over 10 s, 1 s old
    assert known == [(15, pytest.approx(100.0), pytest.approx(10.0), 1.0),
                     (25, pytest.approx(100.0), pytest.approx(10.0), 1.0)]
    assert seen[16][0] is None and seen[24][0] is None  # between figures: unknown


def test_a_figure_after_a_missed_publication_starts_again_instead_of_spanning_the_gap():
    clock, math = FakeClock(), TickMath()
    figures = PublishedFigures(interval_s=10.0, host_cpus=1)
    percents = []
    for at, cpu in ((0, 50.0), (10, 50.0), (30, 80.0), (40, 80.0)):  # the one at 20 s missed
        clock.now = 1000.0 + at
        got = figures.observe(scrape(cpu_of_host=cpu, publications=1), clock.monotonic())
        percents.append(math.step(at, {}, [_sample(got)]).member_cpu_percent["m"])
    assert percents == [None, pytest.approx(50.0), None, pytest.approx(80.0)]


def test_an_exporter_that_does_not_answer_leaves_every_figure_unknown_not_zero():
    figures = PublishedFigures(interval_s=10.0, host_cpus=2)
    got = figures.observe(None, 1000.0)
    assert (got.cpu, got.connections, got.messages_in, got.messages_out) == \
        (None, None, None, None)
    # without the host's cores the exporter's share of the host cannot become CPU of a core
    figures = PublishedFigures(interval_s=10.0, host_cpus=None)
    assert figures.observe(scrape(cpu_of_host=20.0, publications=1), 1000.0).cpu is None


def test_message_counts_add_up_the_publications_deltas_and_connections_come_every_scrape():
    figures = PublishedFigures(interval_s=10.0, host_cpus=2)
    first = figures.observe(scrape(connections=4), 1000.0)  # before any publication
    assert (first.connections, first.messages_in) == (4, None)
    a = figures.observe(scrape(puts=100, gets=90, publications=1), 1001.0)
    b = figures.observe(scrape(connections=6, publications=0), 1002.0)
    c = figures.observe(scrape(puts=50, gets=60, publications=2), 1003.0)
    assert [(f.messages_in, f.messages_out) for f in (a, b, c)] == \
        [(100, 90), (100, 90), (150, 150)]
    assert b.connections == 6
    # an exporter without queue-manager MQI counts: unknown, not a count that stays at 0
    quiet = PublishedFigures(interval_s=10.0, host_cpus=2)
    assert quiet.observe(scrape(cpu_of_host=10.0, publications=1), 1000.0).messages_in is None
    assert quiet.observe(scrape(publications=0), 1001.0).messages_in is None


def test_the_member_rows_say_how_old_each_cpu_figure_is():
    clock, math = FakeClock(), TickMath()
    figures = PublishedFigures(interval_s=5.0, host_cpus=1)
    rows = []
    for second in range(11):
        published = second in (2, 7)
        got = figures.observe(scrape(cpu_of_host=40.0 if published else None,
                                     publications=int(published)), clock.monotonic())
        sample = _sample(got)
        rows += member_rows({"t": second}, [sample], math.step(second, {}, [sample]))
        clock.advance(1.0)
    aged = [(r["t"], r["cpu_percent"], r["cpu_interval_s"], r["cpu_age_s"]) for r in rows
            if r["cpu_percent"] is not None]
    assert aged == [(7, pytest.approx(40.0), pytest.approx(5.0), 1.0)]
    assert all(r["cpu_age_s"] is None for r in rows if r["cpu_percent"] is None)


def _sample(figures):
    from topologies.mq.provision import member_sample
    return member_sample("m", True, figures, 1.0)
