"""The live view of a run: a rich panel on a terminal, a progress line otherwise."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from results.rundir.steps import MESSAGES, Terms


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
    # the target over the second the rates were measured in (the previous tick's): a step's
    # first second compares what was received to what was asked then, not to the new rate
    measured_target: float | None = None
    send_rate: float | None = 0.0  # None: a source missed this second (shown as "-")
    receive_rate: float | None = 0.0
    members_running: int = 0
    member_cpu: dict[str, float | None] = field(default_factory=dict)
    queue_depth: int | None = 0
    backlog: int | None = 0  # sent - received: messages in queues and in flight (consumer lag)
    p50_ms: float | None = 0.0
    p99_ms: float | None = 0.0
    missing: int = 0  # sources whose reading missed this second's deadline
    errors: int = 0
    reconnects: int = 0
    blocked: int = 0  # connections the broker blocks now (a resource alarm holds publishers)
    blocked_s: float = 0.0  # seconds some connection was blocked, summed over agents
    phase: str = "starting"
    last_event: str = ""
    metrics_url: str = ""
    web_url: str = ""
    waiting_since: float | None = None  # monotonic start of work before the load
    terms: Terms = MESSAGES  # what the rates count (round trips/s), what clients are called
    sending: int | None = None  # senders (requesters) publishing now
    consuming: int | None = None  # receivers (responders) consuming now
    received_history: deque = field(default_factory=lambda: deque(maxlen=HISTORY_S))

    @property
    def achieved_ratio(self) -> float | None:
        """:func:`achieved` of this state."""
        return achieved(self)


HISTORY_S = 60  # seconds of the received rate the view draws
_BARS = "▁▂▃▄▅▆▇█"


ALWAYS_SAID = frozenset(("web", "scale_failed", "queues_unchecked", "agent_lost",
                         "member_lost", "receivers_not_ready", "broker"))
"""Events said even without the view: where the live page is, what broker (an emulator above
all) the figures are of, and what went wrong while the run went on (an error that ends the run
is the command's own last line, not said twice)."""


class LiveView:
    """Shows :class:`ViewState`; use as a context manager around the run."""

    def __init__(self, enabled: bool = True, plain_every_s: float = 5.0):
        self.console = Console(stderr=True)
        self.fancy = enabled and self.console.is_terminal
        self.quiet = not enabled
        self.plain_every_s = plain_every_s
        self._last_plain = 0.0
        self._live: Live | None = None
        self._state: ViewState | None = None

    def __enter__(self) -> LiveView:
        if self.fancy:  # redrawn 4 times a second from the last state (a wait's clock moves)
            self._live = Live(get_renderable=self._renderable, console=self.console,
                              refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.__exit__(*exc)

    def _renderable(self):
        return render(self._state) if self._state else Text("")

    def update(self, state: ViewState) -> None:
        """Redraw (terminal) or print a progress line (logs, CI, ``--no-live``)."""
        self._state = state
        if self._live:
            self._live.refresh()
        elif time.monotonic() - self._last_plain >= self.plain_every_s:
            self._last_plain = time.monotonic()
            print(plain_line(state), file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def waiting(self, state: ViewState, what: str) -> Iterator[None]:
        """Work before the load (provisioning, agents): the view says what and for how long,
        on a terminal as it goes, in a log (or with ``--no-live``) every ``plain_every_s``."""
        state.phase, state.waiting_since = what, time.monotonic()
        self._state = state
        done = threading.Event()
        if not self.fancy:
            def progress() -> None:
                while not done.wait(self.plain_every_s):
                    print(plain_line(state), file=sys.stderr, flush=True)
            threading.Thread(target=progress, name="view-wait", daemon=True).start()
        try:
            yield
        finally:
            done.set()
            state.waiting_since = None

    def say(self, message: str, event: str | None = None) -> None:
        """A line above the panel (events: member started, step changed, errors). Without the
        view (``--no-live``: its progress lines only) the events said are those that matter:
        lines of no event (a moved metrics port, a stop asked for) and of the events in
        :data:`ALWAYS_SAID`."""
        if not self.quiet or event is None or event in ALWAYS_SAID:
            self.console.print(message)


def figure(value: float | None, spec: str = ",.0f") -> str:
    """A number for the view, or "-" where it is unknown this second."""
    return "-" if value is None else format(value, spec)


def achieved(s: ViewState) -> float | None:
    """End to end, as the step table takes it: the lower of the send and receive rates over
    the last second against what the plan asked over it (``None`` while there is no target:
    paused, draining, unknown). The lower one, because a receive rate counts copies where an
    exchange routes each message to several queues, and catches up on a backlog."""
    target = s.target_rate if s.measured_target is None else s.measured_target
    if s.receive_rate is None or not target or not s.target_rate:
        return None
    return min(s.receive_rate, s.send_rate if s.send_rate is not None else s.receive_rate) \
        / target


def target_text(s: ViewState) -> str:
    """The target the achieved share is judged against: in a step's first second the rates
    were measured at the previous target, so both are said (``2,000 -> 3,000``)."""
    if s.measured_target is not None and s.measured_target != s.target_rate:
        return f"{s.measured_target:,.0f} -> {s.target_rate:,.0f}"
    return f"{s.target_rate:,.0f}"


def sparkline(values: Iterable[float | None], width: int = HISTORY_S) -> str:
    """The last ``width`` values as bars scaled to their highest (a gap where unknown)."""
    shown = list(values)[-width:]
    top = max((v for v in shown if v is not None), default=0) or 1
    return "".join(" " if v is None else _BARS[min(7, int(v / top * 7.999))] for v in shown)


def blocked_note(s: ViewState) -> str:
    """What the view says while the broker blocks publishers ("" while it does not): the
    senders are held by the broker, not slow."""
    if not s.blocked:
        return ""
    return f"BLOCKED by the broker: {s.blocked} connections ({s.blocked_s:.0f} s so far)"


def _waited(s: ViewState) -> str:
    return f"{s.phase} ({time.monotonic() - s.waiting_since:.0f} s)"


def plain_line(s: ViewState) -> str:
    """One line of progress with units."""
    if s.waiting_since is not None:
        return f"[{s.run_id}] {_waited(s)}"
    cpu = " ".join(figure(v) + "%" if v is not None else "-" for v in s.member_cpu.values())
    missing = f"  ({s.missing} sources missing)" if s.missing else ""
    ratio, unit, terms = achieved(s), s.terms.unit, s.terms
    target = ("senders stopped" if s.phase in ("draining", "paused") else
              f"target {target_text(s)} {unit}  achieved {figure(ratio, '.1%')}"
              if s.target_rate else "target max")
    return (f"[{s.elapsed_s:6.0f}/{s.planned_s:.0f} s] {s.phase} step {s.step}/{s.steps} "
            f"{target}  {terms.senders} {figure(s.sending)}  {terms.receivers} "
            f"{figure(s.consuming)}  sent {figure(s.send_rate)} {unit}  "
            f"received {figure(s.receive_rate)} {unit}  in flight {figure(s.backlog)}  "
            f"depth {figure(s.queue_depth)}  p50 {figure(s.p50_ms, '.1f')} ms  "
            f"p99 {figure(s.p99_ms, '.1f')} ms  members {s.members_running} (CPU {cpu})  "
            f"errors {s.errors}{missing}" + (f"  {blocked_note(s)}" if s.blocked else ""))


def render(s: ViewState):
    """The rich panel for one state."""
    if s.waiting_since is not None:
        return Group(Text.assemble((f"surge {s.scenario}", "bold"), f"  run {s.run_id}  ",
                                   (_waited(s), "cyan")))
    head = Text.assemble((f"surge {s.scenario}", "bold"), f"  run {s.run_id}  ",
                         (s.phase, "cyan"), f"  {s.elapsed_s:.0f}/{s.planned_s:.0f} s")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    unit = s.terms.unit
    for column in ("step", s.terms.senders, s.terms.receivers, f"target {unit}",
                   f"sent {unit}", f"received {unit}", "achieved", "in flight", "queue depth",
                   "p50 ms", "p99 ms", "members", "errors", "reconnects"):
        table.add_column(column, justify="right")
    ratio = achieved(s)
    style = "dim" if ratio is None else "green" if ratio >= 0.98 else "yellow" \
        if ratio >= 0.9 else "red"
    stopped = s.phase in ("draining", "paused")
    table.add_row(f"{s.step}/{s.steps}", figure(s.sending), figure(s.consuming),
                  "stopped" if stopped else target_text(s) if s.target_rate else "max",
                  figure(s.send_rate), figure(s.receive_rate),
                  Text(s.phase if stopped else figure(ratio, ".1%"), style=style),
                  figure(s.backlog), figure(s.queue_depth), figure(s.p50_ms, ".1f"),
                  figure(s.p99_ms, ".1f"), str(s.members_running), str(s.errors),
                  str(s.reconnects))
    cpu = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name in s.member_cpu:
        cpu.add_column(f"{name.split('@')[0]} CPU%", justify="right")
    cpu.add_row(*[f"{v:.1f}" if v is not None else "stopped" for v in s.member_cpu.values()])
    peak = max((v for v in s.received_history if v is not None), default=None)
    history = Text.assemble(("received, last minute ", "dim"),
                            (sparkline(s.received_history), "green"),
                            (f"  peak {figure(peak)} {unit}", "dim"))
    footer = Text(f"{s.last_event}", style="dim")
    if s.blocked:
        footer = Text.assemble((blocked_note(s), "bold red"), "   ", footer)
    if s.missing:
        footer.append(f"   {s.missing} sources missed this second", style="yellow")
    for name, url in (("page", s.web_url), ("controller metrics", s.metrics_url)):
        if url:
            footer.append(f"   {name}: {url}", style="dim")
    return Group(head, table, history, cpu, footer)
