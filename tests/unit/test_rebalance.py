from collections import Counter

import pytest

from orchestrator.scaling.rebalance import fair_moves


def place(counts: dict[int, int]) -> dict[str, int]:
    return {f"w{m}-{i}": m for m, n in counts.items() for i in range(n)}


@pytest.mark.parametrize("counts, members, moved, shares", [
    ({0: 180}, [0, 1], 90, [90, 90]),
    ({0: 90, 1: 90}, [0, 1, 2], 60, [60, 60, 60]),
    ({0: 10, 1: 10}, [0, 1, 2], 6, [7, 7, 6]),          # 20 over 3: 7/7/6, fewest moves
    ({0: 7, 1: 7, 2: 6}, [0, 1, 2], 0, [7, 7, 6]),      # already fair: nothing moves
    ({0: 60, 1: 60, 2: 60}, [0, 1], 60, [90, 90]),      # drain member 2
    ({0: 1}, [0, 1, 2, 3], 0, [1, 0, 0, 0]),
])
def test_fair_moves(counts, members, moved, shares):
    placement = place(counts)
    moves = fair_moves(placement, members)
    assert len(moves) == moved
    assert all(placement[w] != m for w, m in moves.items())
    final = Counter({**placement, **moves}.values())
    assert sorted((final[m] for m in members), reverse=True) == sorted(shares, reverse=True)
    assert set(final) <= set(members)


def test_no_members_is_an_error():
    with pytest.raises(ValueError):
        fair_moves({"a": 0}, [])
