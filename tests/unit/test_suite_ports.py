"""The integration modules run two at a time (``make test``): no two of them may give their
brokers or queue managers the same ports. Each module's port bases are read from its source
(``PORT_BASE = N``, ``"port_base": N``, ``port_base=N``, ``linked_topology("name", N)``)."""

import re
from itertools import combinations
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
BASE = re.compile(r'(?:PORT_BASE\s*=\s*(?:int\(os\.environ\.get\("\w+",\s*")?'
                  r'|"port_base":\s*|port_base=|linked_topology\("[\w-]+",\s*)(\d{4,5})\b')
SPAN = 10  # ports a base covers: a member per port from the base (the tests run at most 10)


def bases() -> dict[str, set[int]]:
    """Each integration module's port bases."""
    found = {path.name: {int(m.group(1)) for m in BASE.finditer(path.read_text())}
             for path in sorted(INTEGRATION.glob("*.py"))}
    return {name: ports for name, ports in found.items() if ports}


def test_the_pattern_finds_the_modules_port_bases():
    found = bases()
    assert {7200} <= found["conftest.py"] and {9000} <= found["test_campaign.py"], found
    assert {9530} <= found["test_mq_linked.py"] and {10500} <= found["test_linked.py"], found
    assert len(found) >= 25, sorted(found)


def test_no_two_integration_modules_share_a_port_range():
    clashes = [(a, x, b, y) for (a, xs), (b, ys) in combinations(bases().items(), 2)
               for x in xs for y in ys if abs(x - y) < SPAN]
    assert not clashes, clashes
