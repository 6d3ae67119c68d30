"""The live view of a run: a rich panel on a terminal, a progress line otherwise."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text


@dataclass
class ViewState:
    """What the view shows; the controller fills it each tick."""

    scenario: str = ""
    run_id: str = ""
    step: int = 0
    steps: int = 0
    elapsed_s: float = 0.0
    planned_s: float = 0.0
    target_rate: float = 0.0
    send_rate: float | None = 0.0  # None: a source missed this second (shown as "-")
    receive_rate: float | None = 0.0
    members_running: int = 0
    member_cpu: dict[str, float | None] = field(default_factory=dict)
    queue_depth: int | None = 0
    p99_ms: float | None = 0.0
    missing: int = 0  # sources whose reading missed this second's deadline
    errors: int = 0
    reconnects: int = 0
    phase: str = "starting"
    last_event: str = ""
    metrics_url: str = ""


class LiveView:
    """Shows :class:`ViewState`; use as a context manager around the run."""

    def __init__(self, enabled: bool = True, plain_every_s: float = 5.0):
        self.console = Console(stderr=True)
        self.fancy = enabled and self.console.is_terminal
        self.quiet = not enabled
        self.plain_every_s = plain_every_s
        self._last_plain = 0.0
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.fancy:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.__exit__(*exc)

    def update(self, state: ViewState) -> None:
        """Redraw (terminal) or print a progress line (logs, CI)."""
        if self._live:
            self._live.update(render(state))
        elif not self.quiet and time.monotonic() - self._last_plain >= self.plain_every_s:
            self._last_plain = time.monotonic()
            print(plain_line(state), file=sys.stderr, flush=True)

    def say(self, message: str) -> None:
        """A line above the panel (events: member started, step changed, errors)."""
        if not self.quiet:
            self.console.print(message)


def figure(value: float | None, spec: str = ",.0f") -> str:
    """A number for the view, or "-" where it is unknown this second."""
    return "-" if value is None else format(value, spec)


def plain_line(s: ViewState) -> str:
    """One line of progress with units."""
    cpu = " ".join(figure(v) + "%" if v is not None else "-" for v in s.member_cpu.values())
    missing = f"  ({s.missing} sources missing)" if s.missing else ""
    return (f"[{s.elapsed_s:6.0f}/{s.planned_s:.0f} s] {s.phase} step {s.step}/{s.steps} "
            f"target {s.target_rate:,.0f} msg/s  sent {figure(s.send_rate)} msg/s  "
            f"received {figure(s.receive_rate)} msg/s  members {s.members_running} "
            f"(CPU {cpu})  depth {figure(s.queue_depth)}  p99 {figure(s.p99_ms, '.1f')} ms  "
            f"errors {s.errors}{missing}")


def render(s: ViewState):
    """The rich panel for one state."""
    head = Text.assemble((f"surge {s.scenario}", "bold"), f"  run {s.run_id}  ",
                         (s.phase, "cyan"), f"  {s.elapsed_s:.0f}/{s.planned_s:.0f} s")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("step", "target msg/s", "sent msg/s", "received msg/s", "achieved",
                   "members", "queue depth", "p99 ms", "errors", "reconnects"):
        table.add_column(column, justify="right")
    ratio = None if s.send_rate is None else s.send_rate / s.target_rate if s.target_rate \
        else 1.0
    style = "dim" if ratio is None else "green" if ratio >= 0.98 else "yellow" \
        if ratio >= 0.9 else "red"
    table.add_row(f"{s.step}/{s.steps}", f"{s.target_rate:,.0f}", figure(s.send_rate),
                  figure(s.receive_rate), Text(figure(ratio, ".1%"), style=style),
                  str(s.members_running), figure(s.queue_depth), figure(s.p99_ms, ".1f"),
                  str(s.errors), str(s.reconnects))
    cpu = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    names = list(s.member_cpu)
    for name in names:
        cpu.add_column(f"{name.split('@')[0]} CPU%", justify="right")
    cpu.add_row(*[f"{v:.1f}" if v is not None else "stopped" for v in s.member_cpu.values()])
    footer = Text(f"{s.last_event}", style="dim")
    if s.missing:
        footer.append(f"   {s.missing} sources missed this second", style="yellow")
    if s.metrics_url:
        footer.append(f"   controller metrics: {s.metrics_url}", style="dim")
    return Group(head, table, cpu, footer)
