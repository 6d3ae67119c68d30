"""``run.json``, the run's manifest: a typed model of everything it holds, its format version,
the one reader (:func:`read_manifest`) and the writer (:meth:`RunManifest.write`).

The controller builds a :class:`RunManifest` when a run starts (:meth:`RunManifest.begin`),
rewrites it as the run goes (:meth:`RunManifest.replace`, :meth:`RunManifest.write`) and ends
it with the outcome, the accounting and the step table. Everything that reads a run (the
analysis and its report, ``surge compare``, a campaign's verdicts) reads it here, so a
damaged or foreign file is named in one way everywhere, and a file of a newer format is
refused rather than misread. Runs of formats 1 and 2 read as well: what they did not record
is unknown (``None``) or empty.

The resolved scenario and topology are recorded as their specs' JSON, verbatim: a run stays
readable when the spec models change later. What the readers use of them is typed here
(:attr:`RunManifest.scenario_name`, :attr:`RunManifest.settle_s`,
:attr:`RunManifest.scale_out_window_s`) and checked when the file is read.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    field_serializer,
)

from orchestrator.errors import FileError, one_line
from orchestrator.specs.plan import Phase
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.jsonfile import read_object, replace_text
from results.rundir.locks import CONTROLLER_LOCK, is_held
from results.rundir.parts import read_files
from results.rundir.steps import StepRow, Terms, fast_path_line, terms_of

FORMAT_VERSION = 3
"""3: every reading is timed at its source: ticks carry lateness_s, depth_age_s, backlog (sent -
received: messages in queues and in flight to or from them), agents_missing,
read_span_s, broker_missing, skipped/skip_rate, nacked, held; rates and percentiles are null when
unknown; members carry phase and cpu_interval_s (the interval the CPU% is over) and null (not 0)
for figures a member did not report; a hosts table holds each host's CPU; agents carry
monotonic_s; members may carry cpu_age_s (at most how old the CPU figure is, where the source
says: IBM MQ's published statistics), absent in earlier runs of this format; ticks may carry
intended_p50_ms, intended_p99_ms, intended_buckets and intended_counts (latency from each
message's intended send time), absent in earlier runs of this format; members may carry the
member's own resources (memory_bytes, memory_limit_bytes, memory_percent_of_watermark,
memory_alarm, disk_free_bytes, disk_free_limit_bytes, disk_alarm, fds_open, fds_max,
network_in_bytes, network_out_bytes, and network_in_mbps, network_out_mbps, network_link_mbps),
absent in earlier runs of this format. 2: members carry
messages_in and messages_out. 1 had neither."""
READABLE_VERSIONS = tuple(range(1, FORMAT_VERSION + 1))
MANIFEST_FILE = "run.json"
SHOWN_PROBLEMS = 3  # validation problems named in the error; the rest are counted

Outcome = Literal["running", "completed", "interrupted", "aborted", "failed"]
"""``running`` until the run ends (so a crashed run is left ``running``)."""


class Record(BaseModel):
    """A part of the manifest: immutable; keys this surge does not know are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Quantiles(Record):
    """Nearest-rank quantiles of some seconds (``None`` when there were none)."""

    count: int = 0
    p50: float | None = None
    p99: float | None = None
    max: float | None = None


class Sampling(Record):
    """How timely the run's own measurements were (format 3 on): how late the ticks fired,
    whole seconds skipped because a tick ran over, how old the queue depths were, and the
    deadline by which a tick's readings had to be in (seconds); where recorded (absent in
    earlier runs), the controller process's CPU in % of one core over the load part, and that
    part's seconds."""

    tick_lateness_s: Quantiles = Quantiles()
    ticks_skipped: int = 0
    depth_age_s: Quantiles = Quantiles()
    deadline_s: float | None = None
    controller_cpu_percent: float | None = None
    load_s: float | None = None


class ClockOffset(Record):
    """One load host's clock against the controller's (ms)."""

    offset_ms: float
    uncertainty_ms: float


class Clocks(Record):
    """The load hosts' clocks (SSH agents): how far apart they may be, and so whether latency
    measured across hosts can be trusted."""

    hosts: dict[str, ClockOffset]
    latency_error_bound_ms: float
    latency_reliable: bool


class Prometheus(Record):
    """Where Prometheus scrapes the run: the controller's and agents' ``host:port`` and the
    file-based service-discovery file that lists them while the run goes."""

    controller: str
    agents: list[str] = []
    sd_file: str | None = None


class HostFacts(Record):
    """The host the run was driven from."""

    hostname: str | None = None
    cpus: int | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    python: str | None = None


class Accounting(Record):
    """The end-of-run balance (``drivers.accounting.Reconciliation`` as recorded, with its
    one-line explanation): ``None`` where the queues could not be read, never guessed."""

    sent: int
    confirmed: int | None = None
    nacked: int = 0  # messages nacked, each once
    # of them, not published again after their last nack; None in runs recorded before it was
    # kept, whose ``nacked`` was that figure
    not_republished: int | None = None
    received: int
    duplicates: int = 0
    still_queued: int | None = None
    lost: int | None = None
    unexplained: int | None = None
    balanced: bool
    # messages whose fate a lost agent took with it (sent or received after its last
    # reading): unknown, not lost; None where no agent was lost
    unknown: int | None = None
    # published to an exchange: messages published (the other figures count their copies),
    # and per subscription queue its copies routed, received, duplicates, queued and lost
    published: int | None = None
    subscriptions: dict[str, dict[str, int]] = {}
    explain: str = ""

    def verdict(self) -> str:
        """``balanced``, ``unknown N`` (an agent was lost) or ``lost N`` (``lost ?`` when the
        loss is unknown)."""
        if self.balanced:
            return "balanced"
        if self.unknown is not None:
            return f"unknown {self.unknown}"
        return f"lost {'?' if self.lost is None else self.lost}"


class Interruption(Record):
    """Why a run ended before its plan did: a stop signal, a full disk, or a controller that died
    (found out later, by the next command that read the run); ``last_second_s``, the last second
    of the plan it recorded."""

    reason: str
    last_second_s: float | None = None


class FastPathRecord(Record):
    """Whether the run's load agents ran the AMQP driver's fast path (its own frame encoding
    and decoding, :mod:`drivers.amqp.frames`), and if not, why not (naming the agents when
    they differ)."""

    on: bool
    why: str = ""

    def line(self) -> str:
        """``AMQP fast path: on``, or ``off (why)``: the step table's and report's first line."""
        return fast_path_line(self.on, self.why)


class HotPathRecord(Record):
    """Whether the run's load agents ran the compiled hot path (:mod:`results.rundir.compiled`)
    or the pure-Python one, and if pure, why (naming the agents when they differ)."""

    on: bool
    why: str = ""

    def line(self) -> str:
        """``hot path: compiled``, or ``pure (why)``."""
        return "hot path: compiled" if self.on else \
            f"hot path: pure ({self.why or 'reason unknown'})"


class BrokerRecord(Record):
    """What the broker said it is when the run's clients were checked before the load: its
    product, version and description, and whether it is an emulator for tests (whose CPU and
    rates are the emulator's, not the product's)."""

    product: str
    version: str = ""
    description: str = ""
    emulated: bool = False

    def line(self) -> str:
        """``Broker: IBM MQ 9.4.0.0``, or for an emulator ``Broker: emulated MQ (...)``:
        a first line of the step table and report."""
        if self.emulated:
            short = "emulated MQ" if self.product == "IBM MQ" else f"emulated {self.product}"
            return (f"Broker: {short} ({self.description or 'an emulator'}): its CPU and "
                    f"rates are the emulator's, not {self.product}'s")
        return f"Broker: {self.product} {self.version}".rstrip()


class LinkRecord(Record):
    """Linked clusters (a topology's ``link``): each side's members, the member the link runs
    in, and the state of each shovel or sender channel once the clusters were up."""

    kind: str = "shovel"  # or channel (IBM MQ)
    sides: list[list[str]]  # member node names, side a then side b
    runs_in: str = ""  # the member whose CPU carries the link's; "": each member its own part
    shovels: dict[str, str] = {}  # name -> starting, running, terminated
    channels: dict[str, str] = {}  # sender channel -> running, retrying, stopped, inactive...

    def states(self) -> dict[str, str]:
        """Each part of the link (shovel or sender channel) and its state."""
        return {**self.shovels, **self.channels}

    def where(self) -> str:
        """Where the link's work is done, in words."""
        return f"inside {self.runs_in}" if self.runs_in else "inside each queue manager"

    def side_of(self, member: str) -> str:
        """``A`` or ``B``: the side of member ``member`` ("" if neither)."""
        return next((letter for letter, names in zip("AB", self.sides) if member in names), "")


class Reuse(Record):
    """Members that were already running when the run began, and who had started them."""

    members: list[str]
    started_by: dict[str, Any] = {}  # kind (run, campaign, capacity, up), id, pid; {}: unknown
    why: str = ""


class FaultRecovery(Record):
    """Seconds from a fault until the achieved rate was back within 5% of target; the seconds
    in between when nothing was received at all (the receive gap), and when the broker blocked
    publishers. ``fault`` is a scheduled fault's kind, or ``member_lost`` for a member that
    stopped serving without the run stopping it (``member`` names it)."""

    fault: str
    at_s: float
    recovery_s: float | None = None
    member: str | None = None
    receive_gap_s: float | None = None
    blocked_s: float | None = None


class BacklogResult(Record):
    """A step's backlog test: the backlog asked for and built (messages), the seconds to
    build it and to drain it (to ``1 - drain_ratio`` of itself), and the rate receivers took
    messages at while it drained (msg/s); ``None`` for a part the step's hold cut short."""

    step: int
    target_messages: int
    built_messages: int | None = None
    build_s: float | None = None
    drain_s: float | None = None
    drain_rate: float | None = None
    drain_ratio: float = 1.0
    publish_ratio: float = 1.0


def _legacy_step(row: Any) -> Any:
    """A format 1 step row had no label: its step number is its label."""
    if isinstance(row, dict) and "label" not in row and "step" in row:
        return {**row, "label": str(row["step"])}
    return row


Step = Annotated[StepRow, BeforeValidator(_legacy_step)]


def _no_accounting(value: Any) -> Any:
    """An empty object records no accounting (as synthetic runs write it)."""
    return None if value == {} else value


Accounted = Annotated[Accounting | None, BeforeValidator(_no_accounting)]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: expected a number, got {value!r:.60}")
    return float(value)


def _recorded_scenario(scenario: dict[str, Any]) -> dict[str, Any]:
    """The recorded scenario, checked for what the readers take from it."""
    if not isinstance(scenario.get("name"), str):
        raise ValueError(f"name: expected the scenario's name, got {scenario.get('name')!r:.60}")
    measure = scenario.get("measure") or {}
    if not isinstance(measure, dict):
        raise ValueError("measure: expected an object")
    if "settle" in measure:
        _number(measure["settle"], "measure.settle")
    for trigger in _scale_out_triggers(scenario):
        _number(trigger.get("for_s", trigger.get("for")), "scaling.scale_out trigger for_s")
    return scenario


def _scale_out_triggers(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    rule = (scenario.get("scaling") or {}).get("scale_out") or {}
    triggers = rule.get("when_any") or rule.get("when_all") or []
    if not isinstance(triggers, list) or not all(isinstance(t, dict) for t in triggers):
        raise ValueError("scaling.scale_out: expected a list of triggers")
    return triggers


RecordedScenario = Annotated[dict[str, Any], AfterValidator(_recorded_scenario)]
"""A :class:`~orchestrator.specs.scenario.ScenarioSpec` as JSON, verbatim."""


class ProbeRecord(Record):
    """One probe of a capacity search: its step, the total rate it held, whether the SLO held
    (and why not), and the rate, p99 (the one the SLO is held to) and deepest backlog it
    measured."""

    step: int
    rate: float
    confirm: bool = False
    held: bool
    achieved: float | None = None
    p99_ms: float | None = None
    max_backlog: int | None = None
    reasons: list[str] = []
    missing_seconds: int = 0  # steady seconds where some reading missed its deadline
    reconnects: int = 0
    bottleneck: str = ""  # what saturated (see results.rundir.bottleneck); "": not recorded


class CapacityRecord(Record):
    """A capacity search (``surge capacity``): the member count, the condition (and its
    faults) every probe was held under, the SLO its probes were held to, every probe, the
    highest target that held (``None``: none did) and the rate it carried end to end
    (``rate``, at most the target), with why it ended."""

    members: int
    slo: dict[str, Any]
    probes: list[ProbeRecord] = []
    rate: float | None = None
    target: float | None = None
    converged: bool = False
    why: str = ""
    condition: str = "ideal"  # what every probe was measured under (capacity.conditions)
    faults: list[dict[str, Any]] = []  # that condition's faults, as given


class RunManifest(Record):
    """Everything ``run.json`` holds. Build it with :meth:`begin`, change it with
    :meth:`replace`, save it with :meth:`write`; read it with :func:`read_manifest`."""

    format_version: int = FORMAT_VERSION
    run_id: str
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: Outcome | None = None
    scenario: RecordedScenario
    topology: dict[str, Any] | None = None  # a TopologySpec as JSON, verbatim
    phases: list[Phase] = []  # the plan expanded, as the run followed it
    versions: dict[str, str] = {}  # surge and the libraries that shape the figures
    host: HostFacts | None = None
    clocks: Clocks | None = None  # SSH agents only
    accounting: Accounted = None
    accounting_details: dict[str, int] = {}  # out_of_order, redelivered, republished, ...
    steps: list[Step] = []
    drain: Step | None = None
    faults: list[FaultRecovery] = []  # scenarios with faults only
    backlogs: list[BacklogResult] = []  # plan steps with a backlog test only
    sampling: Sampling | None = None
    prometheus: Prometheus | None = None
    unmeasured: dict[str, str] = {}  # figure -> why this placement cannot know it
    capacity: CapacityRecord | None = None  # surge capacity's runs only
    interruption: Interruption | None = None  # runs that ended before their plan did
    reused: Reuse | None = None  # runs that began on members already running
    # load agents the run lost: index, host, lost_at_s, last_reading_s, senders, receivers and
    # what they had sent, received, confirmed and nacked by their last reading
    agents_lost: list[dict[str, Any]] = []
    fast_path: FastPathRecord | None = None  # AMQP runs only, as the agents' snapshots said
    hot_path: HotPathRecord | None = None  # compiled or pure, as the agents' snapshots said
    broker: BrokerRecord | None = None  # as the check before the load found it (IBM MQ)
    # messages put per destination where the broker said (IBM MQ: the queue manager each put
    # resolved to, a cluster queue's instance), and the first puts' destinations in order
    destinations: dict[str, int] = {}
    destination_sequence: list[str] = []
    link: LinkRecord | None = None  # linked clusters only
    agent_roles: dict[str, str] = {}  # agent index -> senders, receivers, senders and receivers

    @classmethod
    def begin(cls, run_id: str, started_at: datetime, scenario: ScenarioSpec,
              topology: TopologySpec, phases: list[Phase], versions: dict[str, str],
              host: HostFacts) -> RunManifest:
        """The manifest of a run that is starting (outcome ``running``)."""
        return cls(run_id=run_id, started_at=started_at, outcome="running",
                   scenario=scenario.model_dump(mode="json"),
                   topology=topology.model_dump(mode="json"), phases=phases,
                   versions=versions, host=host)

    def replace(self, **changes: Any) -> RunManifest:
        """A copy with ``changes`` (checked as when read)."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        return type(self).model_validate({**given, **changes})

    @field_serializer("steps")
    def _steps_json(self, steps: list[StepRow]) -> list[dict[str, Any]]:
        return [row.as_json() for row in steps]

    @field_serializer("drain")
    def _drain_json(self, drain: StepRow | None) -> dict[str, Any] | None:
        return None if drain is None else drain.as_json()

    def headings(self) -> list[str]:
        """What a reader of the step table must know first, one line each: the broker when
        it is an emulator or said its version, the AMQP fast path and the hot path when
        recorded."""
        return [record.line() for record in (self.broker, self.fast_path, self.hot_path)
                if record]

    @property
    def terms(self) -> Terms:
        """What the run's rates count and its clients are called (its workload's pattern)."""
        return terms_of((self.scenario.get("workload") or {}).get("pattern"))

    @property
    def scenario_name(self) -> str:
        """The scenario's name."""
        return self.scenario["name"]

    @property
    def settle_s(self) -> float:
        """Seconds after each change left out of the step figures (``measure.settle``)."""
        return float((self.scenario.get("measure") or {}).get("settle", 0.0))

    @property
    def scale_out_window_s(self) -> float:
        """The longest a scale-out condition had to hold before the decision (0 without
        scaling)."""
        return max((float(t.get("for_s", t.get("for"))) for t in
                    _scale_out_triggers(self.scenario)), default=0.0)

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON: the fields that were given (the format version always)."""
        return {"format_version": self.format_version,
                **self.model_dump(mode="json", exclude_unset=True)}

    def write(self, run_dir: Path) -> None:
        """(Re)write ``run_dir/run.json`` atomically."""
        write_json(run_dir, self.to_json())


def write_json(run_dir: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as ``run_dir/run.json`` atomically."""
    replace_text(run_dir / MANIFEST_FILE, json.dumps(data, indent=2, default=str))


def read_manifest(run_dir: Path) -> RunManifest:
    """``run_dir/run.json``: checked for a format this surge reads and for every field it
    holds; anything else is a :class:`~orchestrator.errors.FileError` naming the file and
    what was expected."""
    path = run_dir / MANIFEST_FILE
    data = read_object(path, missing="not found; expected a run directory")
    version = data.get("format_version")
    readable = f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}"
    if version is None:
        raise FileError(f"{path}: not the run.json of a run (no format_version; expected "
                        f"{readable})")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FileError(f"{path}: format_version {version!r:.40} is not a format version "
                        f"(expected {readable})")
    if version not in READABLE_VERSIONS:
        raise FileError(f"{path}: format_version {version}; this surge reads {readable} "
                        f"(a newer surge wrote it?)")
    try:
        manifest = RunManifest.model_validate(data)
    except ValidationError as error:
        raise FileError(one_line(f"{path}: not the run.json of a run: "
                                 f"{_problems(error)}")) from None
    if manifest.outcome == "running" and not is_held(run_dir / CONTROLLER_LOCK):
        manifest = _settle_abandoned(run_dir, manifest)
    return manifest


def _settle_abandoned(run_dir: Path, manifest: RunManifest) -> RunManifest:
    """A run that says ``running`` while no controller holds it: its controller died. It is
    ``interrupted`` from its last recorded second on, written back where the directory allows
    (so every reader after this one sees the same)."""
    table = read_files(run_dir, "ticks", ["t", "elapsed_s"])
    ticks = table.to_pylist() if table is not None else []
    last = max(ticks, key=lambda row: row["t"] or 0.0, default=None)
    ended = datetime.fromtimestamp(last["t"], timezone.utc) if last and last["t"] else None
    settled = manifest.replace(outcome="interrupted", ended_at=ended or manifest.started_at,
                               interruption=Interruption(
        reason="the controller stopped without ending the run (killed, or its host went "
               "down); nothing after its last recorded second is known",
        last_second_s=last["elapsed_s"] if last else None))
    with contextlib.suppress(OSError):  # a read-only copy is still read as interrupted
        settled.write(run_dir)
    return settled


def _problems(error: ValidationError) -> str:
    """The first few problems as ``field: what was expected (got ...)``."""
    problems = error.errors(include_url=False)
    shown = []
    for problem in problems[:SHOWN_PROBLEMS]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        got = "" if problem["type"] in ("missing", "value_error") else \
            f" (got {problem['input']!r:.60})"
        shown.append(f"{where.lstrip('.') or 'the file'}: {message}{got}")
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
