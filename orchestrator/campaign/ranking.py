"""The capacity cells of a campaign ranked as document 001 ranks its clusters: by the
provisioned cluster's price per 1,000 msg/s sustained per month, under ideal conditions first
and then under each adverse condition, with the sizes that sustained the target under every
condition marked "passes all" and the cheapest of them named."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.specs.campaign import Campaign, Cell
from results.rundir.manifest import RunManifest
from results.rundir.steps import fixed_width

CONDITIONS_KEY = "capacity.conditions"
IDEAL = "ideal"


@dataclass(frozen=True)
class Searched:
    """One capacity cell's search: the size it searched (the cell without its condition),
    under which condition, the rate it sustained and the provisioned cluster's price."""

    cell: str
    size: tuple  # what the cells of one size under different conditions share
    condition: str
    members: int
    rate: float | None
    monthly: float | None
    target: float | None
    priced_as: str

    @property
    def per_thousand(self) -> float | None:
        """The cluster's price per month per 1,000 msg/s sustained (unknown without either)."""
        return self.monthly / (self.rate / 1000) if self.rate and self.monthly else None


def searched_cells(campaign: Campaign, done: list[tuple[Cell, RunManifest]]) -> list[Searched]:
    """The done cells that are capacity searches, as :class:`Searched`."""
    found = []
    for cell, manifest in done:
        scenario, topology = campaign.specs[cell.id]
        if manifest.capacity is None or scenario.capacity is None:
            continue
        price = scenario.capacity.price
        size = (cell.group, cell.repetition,
                tuple(p for p in cell.params if p[0] != CONDITIONS_KEY))
        found.append(Searched(cell.id, size, manifest.capacity.condition, topology.start,
                              manifest.capacity.rate,
                              price.monthly(topology.start, topology.cpu_per_member),
                              scenario.capacity.target, price.priced_as or "its cores"))
    return found


def passes_all(found: list[Searched]) -> dict[tuple, bool]:
    """Per size with a target: whether it was searched under every condition of the campaign
    and sustained its target under each (document 001's "passes all")."""
    conditions = {s.condition for s in found}
    sizes: dict[tuple, list[Searched]] = {}
    for search in found:
        if search.target:
            sizes.setdefault(search.size, []).append(search)
    return {size: {s.condition for s in mine} == conditions
            and all(s.rate is not None and s.rate >= s.target for s in mine)
            for size, mine in sizes.items()}


def capacity_text(campaign: Campaign, done: list[tuple[Cell, RunManifest]]) -> str:
    """The capacity cells (a search each, at the topology's ``start`` members) ranked within
    each condition, ideal first, with "passes all" per size where a target is set, and the
    cheapest cell of the first condition that sustained ``capacity.target`` (and the cheapest
    size that passes all);
    "" when the campaign has none."""
    found = searched_cells(campaign, done)
    if not found:
        return ""
    conditions = list(dict.fromkeys([IDEAL] + [s.condition for s in found]))
    found.sort(key=lambda s: (conditions.index(s.condition), s.per_thousand is None,
                              s.per_thousand or 0.0))
    passing = passes_all(found)
    first = found[0].condition  # ideal where it was searched

    def money(value: float | None) -> str:
        return "unknown" if value is None else f"{value:,.2f}"
    lines = [["cell", "condition", "members", "priced as", "sustainable msg/s",
              "cluster per month", "per 1,000 msg/s per month", "passes all"]] + [
        [s.cell, s.condition, str(s.members), s.priced_as,
         f"{s.rate:,.0f}" if s.rate else "none held", money(s.monthly), money(s.per_thousand),
         {True: "yes", False: "no"}.get(passing.get(s.size), "-")] for s in found]
    text = ("capacity cells, ideal first and then each condition, cheapest per 1,000 msg/s "
            "sustained first (the provisioned cluster's price):\n" + fixed_width(lines))
    for target in sorted({s.target for s in found if s.target}):
        meeting = [s for s in found if s.rate and s.rate >= target and s.monthly is not None
                   and s.condition == first]
        cheapest = min(meeting, key=lambda s: s.monthly) if meeting else None
        text += (f"\ncheapest cell that sustained {target:,.0f} msg/s: "
                 + (f"{cheapest.cell} ({cheapest.monthly:,.2f} per month)" if cheapest
                    else "none"))
    if len(conditions) > 1 and passing:
        every = [s for s in found if passing.get(s.size) and s.condition == first
                 and s.monthly is not None]
        best = min(every, key=lambda s: s.monthly) if every else None
        text += ("\ncheapest size that passes all (its target under every condition): "
                 + (f"{best.cell} ({best.monthly:,.2f} per month)" if best else "none"))
    return text
