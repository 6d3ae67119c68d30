"""Members that stop serving while nothing in the run stopped them (killed by hand, crashed,
out of memory): the run says which and from what second, as it does for a scheduled fault.

The run stops members itself only through its provisioner (scheduled faults, scale-in), and
those stops have events of their own. :class:`OwnStops` wraps the provisioner so that every
stop the run asks for is known before it happens; :class:`MemberWatch` compares each broker
sample's ``running`` flags with the previous sample's and reports, as ``member_lost``, a member
that stopped serving without one (``member_back`` when it serves again). The recovery time
after it is :func:`results.timeline.fault_recoveries`'s, and the step table splits there
because the number of running members changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.run.listeners import TickRecord
from topologies.base import BrokerSample, Member, Provisioner

LOST = "member_lost"
BACK = "member_back"


class OwnStops:
    """A provisioner that remembers which members the run itself took out of service (until
    the run starts them again, and one more sample: a sample read while the member was down
    may be judged only after it is back); everything else goes to the wrapped one."""

    def __init__(self, provisioner: Provisioner):
        self.provisioner = provisioner
        self.stopped: set[int] = set()
        self.restarted: set[int] = set()  # started again, still the run's own until judged

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Stop member ``index`` (noted first, so no sample can see it down unexplained)."""
        self.stopped.add(index)
        self.provisioner.stop_member(index, kill=kill)

    def start_member(self, index: int | None = None) -> Member:
        """Start a member; once the next sample is judged, its stopping is news again."""
        member = self.provisioner.start_member(index)
        self.restarted.add(member.index)
        self.stopped.discard(member.index)
        return member

    def own(self, index: int) -> bool:
        """Whether member ``index`` is out of service (or just back) by the run's own doing."""
        return index in self.stopped or index in self.restarted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provisioner, name)


class MemberWatch:
    """Reports members that stop serving without the run stopping them."""

    def __init__(self, own: OwnStops, event: Callable[..., None]):
        self.own = own
        self.event = event
        self.serving: list[bool] | None = None  # each member's flag in the last sample
        self.lost: dict[int, float] = {}  # member index -> elapsed second it stopped serving
        self.count = 0  # members lost so far

    def on_tick(self, record: TickRecord) -> None:
        """Compare the second's broker sample with the last (a listener)."""
        self.observe(record.broker, record.elapsed_s)

    def observe(self, broker: BrokerSample | None, elapsed_s: float) -> None:
        """Compare this tick's sample (``None``: it missed, which says nothing) with the last
        one; ``elapsed_s`` is the second the sample was asked for."""
        if broker is None:
            return
        now = [m.running for m in broker.members]
        before = self.serving if self.serving is not None else now
        judged = set(self.own.restarted)
        for index, (was, is_) in enumerate(zip(before, now)):
            name = broker.members[index].name
            if was and not is_ and not self.own.own(index):
                self.lost[index] = elapsed_s
                self.count += 1
                self.event(LOST, member=name, index=index, elapsed_s=elapsed_s,
                           explain=f"{name} stopped serving at {elapsed_s:.0f} s; the run did "
                                   "not stop it")
            elif is_ and not was and index in self.lost:
                since = self.lost.pop(index)
                self.event(BACK, member=name, index=index, elapsed_s=elapsed_s,
                           explain=f"{name} serves again, {elapsed_s - since:.0f} s after it "
                                   "stopped")
        self.own.restarted -= judged
        self.serving = now
