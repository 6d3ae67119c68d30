"""How wide the 12-member projection of a superlinear law fitted over 1 to 4 (or 5) members
stays as repeats grow: the law fitted to document 000's question on this machine, measured
again in simulation with relative noise, each case over 4 seeds.

    .venv/bin/python bench/usl_reach.py
"""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results import usl  # noqa: E402

LAW = usl.Law(4079, -0.0922, 0.0016)


def main() -> None:
    print("counts  repeats  noise  12-member interval (msg/s) per seed, and its width")
    for largest in (4, 5):
        for repeats in (2, 3, 4):
            for noise in (0.03, 0.06):
                cells = []
                for seed in range(4):
                    chance = random.Random(seed)
                    points = [(n, LAW.rate(n) * (1 + chance.gauss(0, noise)))
                              for n in range(1, largest + 1) for _ in range(repeats)]
                    p = usl.rate_at(usl.fit(points), 12)
                    cells.append(f"{p.low:,.0f}-{p.high:,.0f} ({p.high / p.low:.1f}x)"
                                 if p.low else "; ".join(p.withheld))
                print(f"1-{largest}     {repeats}        {noise:.0%}    " + "  ".join(cells))


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("usl_reach"):
        main()
