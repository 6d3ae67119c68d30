"""Which workers move where when members come and go: pure, for any broker.

Senders and receivers are balanced separately, each to a fair share per member (the counts
differ by at most one), moving as few workers as possible and always from the most loaded
member first, the way a uniform cluster spreads its applications.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping


def fair_moves(placement: Mapping[Hashable, int], members: list[int]) -> dict[Hashable, int]:
    """Moves (worker -> new member) that leave every member in ``members`` with a fair share.

    Workers on members not in ``members`` (one being drained) always move.
    """
    if not members:
        raise ValueError("no member to place workers on")
    by_member: dict[int, list[Hashable]] = defaultdict(list)
    for worker, member in placement.items():
        by_member[member].append(worker)
    total = len(placement)
    base, extra = divmod(total, len(members))
    # Members already carrying the most keep the extra ones, so fewer workers move.
    ranked = sorted(members, key=lambda m: (-len(by_member[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}
    leaving: list[Hashable] = []
    for member, workers in sorted(by_member.items()):
        keep = quota.get(member, 0)
        leaving.extend(sorted(workers, key=str)[keep:])
    moves: dict[Hashable, int] = {}
    for member in sorted(members, key=lambda m: len(by_member[m])):
        room = quota[member] - min(len(by_member[member]), quota[member])
        for _ in range(room):
            moves[leaving.pop()] = member
    return moves
