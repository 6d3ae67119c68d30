"""The service level a workload must hold (``slo``) and how ``surge capacity`` searches for the
highest rate that holds it (``capacity``): sections of a scenario."""

from __future__ import annotations

from pydantic import Field

from orchestrator.specs.base import Fraction, Loc, Seconds, Spec
from orchestrator.specs.faults import ConditionSpec
from orchestrator.specs.limits import (
    MAX_CORES_PER_MEMBER,
    MAX_PRICE_PER_MEMBER_HOUR,
    MAX_TOTAL_RATE,
    Number,
)
from orchestrator.specs.prices import MAX_PRICE_PER_CORE_HOUR

#: Hours in the month document 001 prices a cluster over.
HOURS_PER_MONTH = 730.0


class SloSpec(Spec):
    """What a rate must hold to count as carried: over a probe's steady seconds, the p99
    latency (from the intended send time where senders are paced), the deepest queue backlog,
    and the messages lost or failed."""

    p99: Seconds = Field(0.05, gt=0, description="highest p99 latency (50ms)")
    backlog: int = Field(1000, ge=0, description="most messages queued at any second")
    loss: int = Field(0, ge=0, description="most messages lost or failed to send")
    shortfall: Fraction = Field(0.05, ge=0, lt=1, description="most the end-to-end rate may "
                                                              "fall short of the target (5%)")


class PriceSpec(Spec):
    """What the provisioned cluster costs: per core-hour of the members' CPU quota, or per
    member-hour (an instance's price, which wins when given), or a member's instance type
    from a price table (which wins over both); plus, where a storage class is named, its
    volume per member from the storage price table."""

    per_core_hour: Number = Field(0.0425, gt=0, le=MAX_PRICE_PER_CORE_HOUR,
                                  description="currency per core-hour (c5 on demand, about "
                                              "0.0425 USD)")
    per_member_hour: Number | None = Field(None, gt=0, le=MAX_PRICE_PER_MEMBER_HOUR,
                                           description="currency per member-hour (an instance "
                                                       "price)")
    cores_per_member: Number | None = Field(None, gt=0, le=MAX_CORES_PER_MEMBER,
                                            description="cores a member is priced at; default "
                                                        "the topology's cpu_per_member")

    instance_types: dict[str, Number] = Field(
        default_factory=dict, description="price table: currency per hour of each instance "
                                          "type (document 001's c5 sizes), for `instance`")
    instance: str | None = Field(None, description="the instance type a member is priced as "
                                                   "(a key of instance_types; wins over the "
                                                   "other prices)")
    storage_classes: dict[str, Number] = Field(
        default_factory=dict, description="price table: currency per hour of each storage "
                                          "class, one volume per member (gp2, st1, io1)")
    storage: str | None = Field(None, description="the storage class each member's volume is "
                                                  "priced as (a key of storage_classes)")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """``instance`` and ``storage`` name rows of their tables; prices are positive."""
        found: list[tuple[Loc, str]] = []
        for name, table in (("instance", "instance_types"), ("storage", "storage_classes")):
            chosen, rows = getattr(self, name), getattr(self, table)
            if chosen is not None and chosen not in rows:
                found.append(((name,), f"{chosen!r} is not in {table}: expected one of "
                                       f"{', '.join(sorted(rows)) or 'its keys (it is empty)'}"))
            found += [((table, key), f"expected a price per hour above 0 and at most "
                                     f"{MAX_PRICE_PER_MEMBER_HOUR:,.0f} (got {value})")
                      for key, value in rows.items()
                      if not 0 < value <= MAX_PRICE_PER_MEMBER_HOUR]
        return found

    @property
    def priced_as(self) -> str:
        """The instance type and storage class a member is priced as ("" for neither)."""
        return " + ".join(name for name in (self.instance, self.storage) if name)

    def monthly(self, members: int, cores_per_member: float | None) -> float | None:
        """The cluster's price per month (None: a core price with no core count): members x
        (instance type, else member price, else cores x core price; plus its storage class)
        x 730 h."""
        storage = self.storage_classes[self.storage] if self.storage else 0.0
        if self.instance is not None:
            return members * (self.instance_types[self.instance] + storage) * HOURS_PER_MONTH
        if self.per_member_hour is not None:
            return members * (self.per_member_hour + storage) * HOURS_PER_MONTH
        cores = self.cores_per_member or cores_per_member
        return None if cores is None else \
            members * (cores * self.per_core_hour + storage) * HOURS_PER_MONTH


class CapacitySpec(Spec):
    """The search: for each member count, the first probe's rate, how fast it brackets, how
    close it bisects, how long each probe holds (long enough for the backlog the SLO allows to
    build up at ``precision`` over capacity, within ``hold_min`` and ``hold_max``), and how
    long queues may take to drain between probes."""

    members: list[int] = Field(default_factory=list, description="member counts to search; "
                                                                 "default 1 .. the topology's "
                                                                 "members")
    repeat: int = Field(1, ge=1, le=10, description="searches per member count (the fit's error "
                                                    "comes from repeats)")
    start_rate: Number = Field(1000.0, gt=0, le=MAX_TOTAL_RATE,
                               description="total msg/s of the first probe")
    growth: Number = Field(2.0, gt=1, le=10, description="rate factor while the SLO holds")
    precision: Fraction = Field(0.04, gt=0, lt=0.5, description="bisection stops when the "
                                                                "bracket is this narrow")
    max_probes: int = Field(
        16, ge=3, le=64,
        description="most probes of one search (bracketing and bisection together)")
    hold_min: Seconds = Field(10.0, gt=0, description="shortest steady hold of a probe")
    hold_max: Seconds = Field(60.0, gt=0, description="longest steady hold of a probe")
    confirm: Seconds = Field(0.0, ge=0, description="steady hold of the confirmation; default "
                                                    "twice the probe's")
    drain: Seconds = Field(30.0, gt=0, description="longest wait for queues to empty between "
                                                   "probes")
    target: Number | None = Field(None, gt=0, le=MAX_TOTAL_RATE,
                                  description="a total msg/s to carry: the answer names the "
                                              "members it needs")
    price: PriceSpec = Field(
        default_factory=PriceSpec, description="what members cost, for the cost of each answer")
    conditions: list[ConditionSpec] = Field(
        default_factory=list,
        description="conditions every member count is searched under, in order, side by side "
                    "in the answer: ideal (no faults) and named sets of faults held over every "
                    "probe; default ideal only")

    @property
    def searched_under(self) -> list[ConditionSpec]:
        """The conditions to search under (ideal alone when none are given)."""
        return self.conditions or [ConditionSpec(name="ideal")]

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Counts are positive and distinct; the holds are in order; condition names are
        distinct."""
        found: list[tuple[Loc, str]] = []
        if any(m < 1 for m in self.members) or len(set(self.members)) != len(self.members):
            found.append((("members",), f"member counts must be distinct and at least 1 (got "
                                        f"{self.members})"))
        if self.hold_min > self.hold_max:
            found.append((("hold_min",), f"hold_min ({self.hold_min:g} s) is longer than "
                                         f"hold_max ({self.hold_max:g} s)"))
        names = [c.name for c in self.conditions]
        found += [(("conditions", i, "name"), f"{name!r} names two conditions: expected "
                                              f"distinct names")
                  for i, name in enumerate(names) if name in names[:i]]
        return found

    def member_problems(self, counts: list[int]) -> list[tuple[Loc, str]]:
        """Every member a condition's fault acts on is in each of the member ``counts``
        searched."""
        fewest = min(counts)
        return [(("conditions", i, "faults", j, "member"),
                 f"member {fault.member} is not in a cluster of {fewest}: expected a member "
                 f"index below {fewest}, the fewest members searched")
                for i, condition in enumerate(self.conditions)
                for j, fault in enumerate(condition.faults)
                if fault.member is not None and fault.member >= fewest]
