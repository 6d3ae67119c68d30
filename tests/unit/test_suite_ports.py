"""The integration modules run side by side (``make test JOBS=N``): no two of them may give their
brokers or queue managers the same ports. Each module's port bases are read from its source
(``PORT_BASE = N``, ``"port_base": N``, ``port_base=N``, ``linked_topology("name", N)``; each
worker's shared cluster from ``SHARED_PORT_BASES`` in the integration conftest), and every port a
base claims is compared: a RabbitMQ member ``i`` of base ``b`` listens on ``b + i`` (AMQP),
``b + 10000 + i`` (management), ``b + 10100 + i`` (Prometheus) and ``b + 20000 + i`` (Erlang
distribution), its epmd on ``b + 30000``. A base whose line says its ports run on from it (``amqp,
amqps, management, ...``: an existing broker's) and a queue manager's (``test_mq_*``,
``MQ_PORT_BASE``: listeners and exporters) claim :data:`RUN` ports from it instead."""

import re
from itertools import combinations
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
BASE = re.compile(r'(?:(MQ_)?PORT_BASE\s*=\s*(?:int\(os\.environ\.get\("\w+",\s*")?'
                  r'|"port_base":\s*|port_base=|linked_topology\("[\w-]+",\s*)(\d{4,5})\b(.*)')
SHARED = re.compile(r"SHARED_PORT_BASES = \(([\d, ]+)\)")
SPAN = 10  # ports a base covers: a member per port from the base (the tests run at most 10)
OFFSETS = (0, 10000, 10100, 20000)  # AMQP, management, Prometheus, Erlang distribution
EPMD = 30000
RUN = 20  # ports a base of consecutive ports covers (queue managers and their exporters)


def bases() -> dict[str, set[int]]:
    """Each integration module's port bases (negative: a run of consecutive ports from its
    absolute value); each worker's shared cluster as one of its own."""
    found = {path.name: {-int(m.group(2)) if consecutive(path.name, m) else int(m.group(2))
                         for m in BASE.finditer(path.read_text())}
             for path in sorted(INTEGRATION.glob("*.py"))}
    shared = SHARED.search((INTEGRATION / "conftest.py").read_text())
    for worker, base in enumerate(int(b) for b in shared.group(1).split(",") if b.strip()):
        found[f"conftest.py (worker {worker})"] = {base}
    return {name: ports for name, ports in found.items() if ports}


def consecutive(module: str, match: re.Match) -> bool:
    """Whether a base's ports run on from it rather than a RabbitMQ topology's."""
    return module.startswith("test_mq_") or bool(match.group(1)) or "amqp, amqps" in match.group(3)


def claimed(base: int) -> set[int]:
    """Every port the members (up to :data:`SPAN`) of a topology at ``base`` listen on; a
    negative base: the run of :data:`RUN` ports from its absolute value."""
    if base < 0:
        return set(range(-base, -base + RUN))
    return {base + offset + i for offset in OFFSETS for i in range(SPAN)} | {base + EPMD}


def test_the_pattern_finds_the_modules_port_bases():
    found = bases()
    assert {7200} == found["conftest.py (worker 0)"] and {9000} <= found["test_campaign.py"], found
    assert len([name for name in found if name.startswith("conftest.py (worker")]) >= 3, found
    assert {-9530} <= found["test_mq_linked.py"] and {-7500} == found["test_existing.py"], found
    assert len(found) >= 25, sorted(found)


def test_no_two_integration_modules_share_a_port():
    clashes = [(a, x, b, y, sorted(claimed(x) & claimed(y))[:3])
               for (a, xs), (b, ys) in combinations(bases().items(), 2)
               for x in xs for y in ys if claimed(x) & claimed(y)]
    assert not clashes, clashes


def test_bases_100_apart_are_a_clash():
    """Management of one is Prometheus of the other (as 7200 + 50 x worker once was)."""
    assert claimed(7200) & claimed(7300) and not claimed(7200) & claimed(7290)
