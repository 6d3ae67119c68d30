"""Samples that cannot be true: the checks a run's own measurements must pass.

Pure functions of recorded rows (ticks and members as dicts), so the controller, the analysis,
``bench/sample_integrity.py`` and the tests apply the same rules:

- **CPU above quota**: a serving member's CPU% above its cgroup quota by more than the CFS
  period can explain (``QUOTA_SLACK`` x quota + ``QUOTA_POINTS`` points).
- **Received more than was there**: between two ticks, receivers got more messages than were
  there at the first tick plus what senders sent in between (counts, not rates), beyond
  what the time between the first tick's readings allows (``receive rate x read span``: the
  depth and the counters of one tick are read concurrently, not at one instant). What was there
  is the larger of the queue's own count (ready + unacknowledged) and the backlog (sent -
  received): a broker applying flow control holds published messages in its ingress and the
  network, where no queue counts them yet, and a depth that over-reports shows up here.
- **Frozen depth**: the same non-zero queue depth of at least ``FROZEN_MIN_DEPTH`` messages in
  ``FROZEN_TICKS`` or more consecutive ticks while more messages than that went through.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

QUOTA_SLACK = 1.15
QUOTA_POINTS = 5.0
FROZEN_TICKS = 3
FROZEN_MIN_DEPTH = 10


@dataclass
class Suspects:
    """Counts of impossible samples in one run, with the first few examples of each."""

    cpu_over_quota: int = 0
    received_more_than_available: int = 0
    frozen_depth_runs: int = 0
    worst_cpu_ratio: float | None = None
    # informational, not a suspect: ticks receiving more than the queue's own count at the
    # previous tick plus what was sent (the rest was in flight, see the module's docstring)
    received_more_than_queued: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Every suspect sample found."""
        return self.cpu_over_quota + self.received_more_than_available + self.frozen_depth_runs

    def as_dict(self) -> dict:
        """For ``run.json`` and reports."""
        return {**asdict(self), "total": self.total}

    def line(self) -> str:
        """One line for a report."""
        worst = f" (worst {self.worst_cpu_ratio:.2f}x quota)" if self.worst_cpu_ratio else ""
        return (f"suspect samples: {self.cpu_over_quota} member CPU above quota{worst}, "
                f"{self.received_more_than_available} ticks received more than was there "
                f"plus sent, {self.frozen_depth_runs} runs of a frozen queue depth "
                f"({self.received_more_than_queued} ticks received more than the queues held "
                f"plus sent: the rest was in flight)")

    def _example(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def suspect_samples(ticks: list[dict], members: list[dict]) -> Suspects:
    """Apply every check to the rows of one run (ticks in time order)."""
    found = Suspects()
    _cpu_over_quota(members, found)
    _received_more_than_available(ticks, found)
    _frozen_depth(ticks, found)
    return found


def _cpu_over_quota(members: list[dict], found: Suspects) -> None:
    for row in members:
        cpu, quota = row.get("cpu_percent"), row.get("cpu_quota_cores")
        if not row.get("running") or cpu is None or not quota:
            continue
        ratio = cpu / (quota * 100)
        if cpu > QUOTA_SLACK * quota * 100 + QUOTA_POINTS:
            found.cpu_over_quota += 1
            found.worst_cpu_ratio = max(found.worst_cpu_ratio or 0.0, ratio)
            found._example(f"{row['member']} at {row['elapsed_s']:.2f} s: {cpu:.1f}% CPU with "
                           f"a quota of {quota:g} cores")


def _copies(row: dict) -> int | None:
    """The queues each message reached in a run whose exchange copies messages to several,
    from the row's backlog (``sent x copies - received``); 1 in a run without one or recorded
    before the backlog was; ``None`` where the number is not the same for every message."""
    if "backlog" not in row or not row["sent"]:
        return 1
    if row["backlog"] is None:
        return None
    return round((row["backlog"] + row["received"]) / row["sent"])


def _received_more_than_available(ticks: list[dict], found: Suspects) -> None:
    for before, after in zip(ticks, ticks[1:]):
        if before.get("queue_depth") is None or after.get("agents_missing") or \
                before.get("agents_missing"):
            continue
        copies = _copies(before)
        if copies is None:
            continue
        received = after["received"] - before["received"]
        sent = (after["sent"] - before["sent"]) * copies
        there = max(before["queue_depth"], before["sent"] * copies - before["received"])
        allowance = (after.get("receive_rate") or 0.0) * (before.get("read_span_s") or 0.0)
        if received > before["queue_depth"] + sent + allowance:
            found.received_more_than_queued += 1
        if received > there + sent + allowance:
            found.received_more_than_available += 1
            found._example(f"tick at {after['elapsed_s']:.2f} s received {received:,} with "
                           f"{there:,} there and {sent:,} sent")


def _frozen_depth(ticks: list[dict], found: Suspects) -> None:
    run: list[dict] = []
    for tick in ticks + [{}]:
        depth = tick.get("queue_depth")
        if run and depth == run[0].get("queue_depth"):
            run.append(tick)
            continue
        if len(run) >= FROZEN_TICKS and run[0]["queue_depth"] >= FROZEN_MIN_DEPTH:
            flowed = run[-1]["received"] - run[0]["received"]
            if flowed > run[0]["queue_depth"]:
                found.frozen_depth_runs += 1
                found._example(f"depth {run[0]['queue_depth']:,} for {len(run)} ticks from "
                               f"{run[0]['elapsed_s']:.2f} s while {flowed:,} were received")
        run = [tick] if depth else []
