"""The source documents' tables, in their own shapes, from recorded runs.

Each table is registered under a name (``000-table1``, ``003-round-trips`` ...) with the
document and table it reproduces and one function from runs to rows; ``surge table NAME
RUN_DIR...`` prints it, and a campaign's ``tables:`` prints it over its cells at the end. A
figure no run recorded is "-" (unknown), never a guess; the columns the document has and surge
cannot measure here are named in :attr:`DocumentTable.unmeasured`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from orchestrator.errors import SurgeError
from orchestrator.specs.tables import DocumentTable as TableName
from orchestrator.specs.units import parse_size
from results.rundir.manifest import MANIFEST_FILE, LinkRecord, RunManifest, read_manifest
from results.rundir.steps import StepRow, cell, fixed_width


@dataclass(frozen=True)
class Run:
    """One recorded run as the tables read it: its label (the run directory's name, a cell's
    id in a campaign), its manifest and its step rows (the drain left out)."""

    label: str
    manifest: RunManifest

    @property
    def steps(self) -> list[StepRow]:
        """The step rows, without the drain."""
        return list(self.manifest.steps)

    @property
    def final(self) -> StepRow:
        """The last step's row."""
        return self.manifest.steps[-1]


@dataclass(frozen=True)
class Table:
    """A document's table as surge fills it: its header and rows of text cells."""

    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The table, fixed width, then its notes."""
        return "\n".join([fixed_width([self.header, *self.rows]), *self.notes])

    def csv_rows(self) -> list[dict[str, str]]:
        """The rows as dicts by column name (for CSV)."""
        return [dict(zip(self.header, row)) for row in self.rows]


@dataclass(frozen=True)
class Curve:
    """A document's figure drawn from the same runs: a line per run through each step's
    (x, y) point (a point with either unknown is left out)."""

    file: str
    title: str
    xlabel: str
    ylabel: str
    point: Callable[[StepRow], tuple[float | None, float | None]]


@dataclass(frozen=True)
class DocumentTable:
    """A registered table: its name, the document table it reproduces, what one row is, the
    document's columns surge does not measure here, how it is built from runs, and the
    document's figures of the same figures."""

    name: str
    title: str
    rows: str
    build: Callable[[list[Run]], Table]
    unmeasured: tuple[str, ...] = ()
    curves: tuple[Curve, ...] = ()


TABLES: dict[str, DocumentTable] = {}


def table(name: str, title: str, rows: str, unmeasured: tuple[str, ...] = (),
          curves: tuple[Curve, ...] = ()
          ) -> Callable[[Callable[[list[Run]], Table]], Callable[[list[Run]], Table]]:
    """Register the decorated function as document table ``name``."""
    assert name in get_args(TableName), f"{name}: not named in orchestrator.specs.tables"

    def register(build: Callable[[list[Run]], Table]) -> Callable[[list[Run]], Table]:
        TABLES[name] = DocumentTable(name, title, rows, build, unmeasured, curves)
        return build
    return register


def load_runs(run_dirs: list[Path]) -> list[Run]:
    """The runs in ``run_dirs``, each with a step table (a run without one is an error naming
    its ``run.json``) and a label of its own (runs that would share one, as cells of one
    scenario differing only in their fixed overrides, are labelled by their directories);
    files and directories named ``_...`` beside runs (logs, the lake) are passed over."""
    found = []
    for run_dir in run_dirs:
        if run_dir.name.startswith("_") or run_dir.is_file():  # the lake, logs: not runs
            continue
        manifest = read_manifest(run_dir)
        if not manifest.steps:
            raise SurgeError(f"{run_dir / MANIFEST_FILE}: no step table; did the run finish?")
        found.append((run_dir.name, label(run_dir.name, manifest.scenario_name), manifest))
    taken = Counter(name for _, name, _ in found)
    return [Run(name if taken[name] == 1 else directory, manifest)
            for directory, name, manifest in found]


def label(directory: str, scenario: str) -> str:
    """A run's name in a table: a campaign cell's parameters (``001-sweep-topology=local-1-r1``
    -> ``topology=local-1``; ``r2`` on from the second repetition), else its directory's
    name."""
    prefix = re.match(rf"\d{{3}}-{re.escape(scenario)}-?(.*?)-r(\d+)$", directory)
    if prefix is None:
        return directory
    params, repetition = prefix.groups()
    return "-".join(part for part in (params or scenario, "" if repetition == "1"
                                      else f"r{repetition}") if part)


def document_table(name: str, run_dirs: list[Path]) -> Table:
    """Table ``name`` of the runs in ``run_dirs`` (an unknown name is an error listing the
    known ones)."""
    if name not in TABLES:
        raise SurgeError(f"no document table {name!r}; expected one of {', '.join(TABLES)}")
    entry = TABLES[name]
    built = entry.build(load_runs(run_dirs))
    unmeasured = [f"not measured here (\"-\"): {', '.join(entry.unmeasured)}"] \
        if entry.unmeasured else []
    return Table(built.header, built.rows, [*built.notes, *unmeasured])


def plot_table(name: str, run_dirs: list[Path], out: Path) -> list[Path]:
    """Draw table ``name``'s figures of the runs in ``run_dirs`` as PNGs in ``out``; the
    files written (none for a table without figures)."""
    from results.plots import figure, known, save
    if name not in TABLES:
        raise SurgeError(f"no document table {name!r}; expected one of {', '.join(TABLES)}")
    runs = load_runs(run_dirs)
    figures = {}
    for curve in TABLES[name].curves:
        def draw(ax, curve: Curve = curve) -> None:
            for run in runs:
                points = sorted((x, y) for x, y in map(curve.point, run.steps)
                                if x is not None and y is not None)
                ax.plot([x for x, _ in points], known(y for _, y in points), "o-",
                        label=run.label)
            ax.xaxis.get_major_locator().set_params(integer=True)  # counts of clients
            ax.set_ylim(bottom=0)
        figures[curve.file] = figure(curve.ylabel, curve.title, draw, xlabel=curve.xlabel)
    return [out / written for written in save(figures, out)] if figures else []


def listing() -> str:
    """Every registered table: name, the document's table, what a row is."""
    return fixed_width([["table", "reproduces", "one row per"],
                        *[[t.name, t.title, t.rows] for t in TABLES.values()]])


# -- cells ---------------------------------------------------------------------------------------


def _hosts(rows: list[StepRow]) -> list[str]:
    """The broker hosts of ``rows`` (SSH placements); none where members share the
    controller's host."""
    return sorted({h for row in rows for h in row.hosts_cpu_percent})


def _host_header(hosts: list[str]) -> list[str]:
    return [f"{h} CPU%" for h in hosts] if hosts else ["host CPU% (controller's)"]


def _host_cells(row: StepRow, hosts: list[str]) -> list[str]:
    """Each broker host's CPU% (of the whole host); where the members run on the controller's
    host, that host's (load generator included)."""
    if hosts:
        return [cell(row.hosts_cpu_percent.get(h), ",.2f") for h in hosts]
    return [cell(row.host_cpu_percent, ",.2f")]


def _member_cpu(row: StepRow) -> float | None:
    """The members' CPU together (% of one core)."""
    return sum(row.cpu_percent.values()) if row.cpu_percent else None


def _gbs(mbps: dict[str, float]) -> float | None:
    """The members' client traffic one way together (Gb/s); unknown where none said."""
    return sum(mbps.values()) / 1000 if mbps else None


def _agents_cpu(row: StepRow) -> float | None:
    """The load generator's CPU together (% of one core)."""
    return sum(row.agents_cpu_percent.values()) if row.agents_cpu_percent else None


def _size(size: object) -> str:
    """A message size as bytes (a size list or a mix: as written)."""
    try:
        return str(parse_size(size))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-" if size is None else str(size)


def _agent_us(row: StepRow, agent: str) -> float | None:
    """One agent's CPU microseconds per message (round trip) in ``row``."""
    percent = row.agents_cpu_percent.get(agent)
    return None if percent is None else row.us_per_msg(percent)


def _total_us(row: StepRow) -> float | None:
    parts = (row.broker_us_per_msg, row.generator_us_per_msg)
    return None if None in parts else sum(parts)  # type: ignore[arg-type]


# -- the tables ----------------------------------------------------------------------------------


@table("000-table1", "000 (IBM MQ uniform cluster scaling), Table 1",
       "step of each run (a step split where a member started: the document's row pairs)")
def _uniform_table1(runs: list[Run]) -> Table:
    rows = [row for run in runs for row in run.steps]
    hosts = _hosts(rows)
    return Table(["Target Rate msg/s", "Rate Achieved msg/s", "#members", *_host_header(hosts)],
                 [[cell(row.target_rate) if row.target_rate else "max", cell(row.achieved_rate),
                   str(row.members),
                   *_host_cells(row, hosts)] for row in rows],
                 ["Rate Achieved: end to end (the lower of sent and received); CPU% of the "
                  "whole host"])


@table("000-table2", "000 (IBM MQ uniform cluster scaling), Table 2",
       "run (a campaign cell): its final step")
def _uniform_table2(runs: list[Run]) -> Table:
    hosts = _hosts([run.final for run in runs])
    return Table(["Test", "Rate Achieved msg/s", "#members", *_host_header(hosts)],
                 [[run.label, cell(run.final.achieved_rate), str(run.final.members),
                   *_host_cells(run.final, hosts)] for run in runs],
                 ["Test: the run directory (a campaign's cell id); figures of its final step"])


@table("003-round-trips", "003 (IBM MQ Native HA), Figs 2-7: round trips/s per requester count",
       "requester count; a column pair per run (single instance, Native HA, a CPU limit ...)",
       curves=(Curve("003-round-trips.png", "Round trips/s by requester count", "requesters",
                     "round trips/s", lambda row: (row.senders, row.achieved_rate)),
               Curve("003-broker-cpu.png", "Broker CPU by requester count", "requesters",
                     "broker CPU (% of one core)", lambda row: (row.senders, _member_cpu(row)))))
def _round_trips(runs: list[Run]) -> Table:
    counts = sorted({row.senders for run in runs for row in run.steps if row.senders is not None})
    header = ["requesters"]
    for run in runs:
        header += [f"{run.label} round trips/s", f"{run.label} broker CPU%"]
    rows = []
    for count in counts:
        cells = [str(count)]
        for run in runs:
            row = next((r for r in run.steps if r.senders == count), None)
            cells += ["-", "-"] if row is None else [cell(row.achieved_rate),
                                                     cell(_member_cpu(row), ",.1f")]
        rows.append(cells)
    return Table(header, rows, ["broker CPU% of one core (100 = one core), all members "
                                "together; the document's is of the worker node"])


@table("003-results", "003 (IBM MQ Native HA), cphtestp results.csv",
       "step of each run", unmeasured=("readMB", "writeMB"))
def _cphtestp(runs: list[Run]) -> Table:
    rows = []
    for run in runs:
        message = (run.manifest.scenario.get("workload") or {}).get("message") or {}
        for row in run.steps:
            rows.append([run.label, str(bool(message.get("persistent"))).lower(),
                         _size(message.get("size")), cell(row.senders), cell(row.achieved_rate),
                         cell(row.host_cpu_percent, ",.2f"), "-", "-",
                         cell(_gbs(row.network_out_mbps), ",.3f"),
                         cell(_gbs(row.network_in_mbps), ",.3f"),
                         cell(_member_cpu(row), ",.2f")])
    return Table(["run", "persistent", "msgsize bytes", "threads", "rate round trips/s",
                  "cpu %", "readMB", "writeMB", "recvGbs", "sendGbs", "qmcpu %"], rows,
                 ["cphtestp's columns after the run's name; cpu: the client host's CPU (% of "
                  "all its cores); recvGbs and sendGbs: the clients' traffic, as the members "
                  "count it (what they sent to and received from client connections, Gb/s); "
                  "qmcpu: the broker members' CPU together (% of one core)"])


@table("004-cost", "004 (IBM MQ for z/OS), Charts 3 and 5: cost per transaction as queue "
       "pairs grow", "queue pair count; a column group per run (a transport, a message size)",
       curves=(Curve("004-cost.png", "Total cost per transaction with increasing workload",
                     "queue pairs", "CPU us per transaction",
                     lambda row: (row.queues, _total_us(row))),
               Curve("004-rate.png", "Achieved transaction rate with increasing workload",
                     "queue pairs", "transactions/s", lambda row: (row.queues, row.achieved_rate))))
def _queue_pairs(runs: list[Run]) -> Table:
    pairs = sorted({row.queues for run in runs for row in run.steps if row.queues is not None})
    header = ["queue pairs"]
    for run in runs:
        header += [f"{run.label} transactions/s", f"{run.label} broker CPU us/tx",
                   f"{run.label} requesters+servers CPU us/tx", f"{run.label} total CPU us/tx"]
    rows = []
    for count in pairs:
        cells = [str(count)]
        for run in runs:
            row = next((r for r in run.steps if r.queues == count), None)
            cells += ["-"] * 4 if row is None else [
                cell(row.achieved_rate), cell(row.broker_us_per_msg, ",.1f"),
                cell(row.generator_us_per_msg, ",.1f"), cell(_total_us(row), ",.1f")]
        rows.append(cells)
    return Table(header, rows, ["a transaction is one round trip (2 puts, 2 gets); CPU us per "
                                "transaction over each step's steady seconds"])


@table("002-spread", "002 (IBM MQ cluster workload balancing): spread over queue instances",
       "step of each run; a column per member (queue instance); under it, where the broker "
       "said, each run's puts per destination and the sequence of its first ones")
def _spread(runs: list[Run]) -> Table:
    members = sorted({m for run in runs for row in run.steps for m in row.delivered_per_member})
    rows = []
    for run in runs:
        for row in run.steps:
            total = sum(row.delivered_per_member.values())
            rows.append([run.label, row.label, cell(row.balance, ",.3f"), *[
                "-" if m not in row.delivered_per_member or not total else
                f"{row.delivered_per_member[m]:,} ({row.delivered_per_member[m] / total:.1%})"
                for m in members]])
    notes = ["delivered: messages each member's queue instance delivered in the step's "
             "steady seconds (share of all); balance: Jain's index, 1 = even"]
    for run in runs:
        put = run.manifest.destinations
        if put:
            total = sum(put.values())
            notes.append(f"{run.label}: the senders' puts by the queue manager each resolved "
                         "to, over the run: " + ", ".join(
                             f"{name} {count:,} ({count / total:.1%})"
                             for name, count in put.items()))
            notes.append(f"{run.label}: the first {len(run.manifest.destination_sequence)} "
                         "puts (the first agent's senders, in the order they put) went to "
                         + " ".join(run.manifest.destination_sequence))
    return Table(["run", "step", "balance", *[f"{m} delivered" for m in members]], rows, notes)


@table("004-split", "004 (IBM MQ for z/OS), Table 1: CPU per transaction by part",
       "part (broker member, by side where clusters are linked; load generator agent, by the "
       "workers it runs); a column per run",
       unmeasured=("CHIN(s)", "TCPIP", "CF"))
def _cost_split(runs: list[Run]) -> Table:
    members = sorted({m for run in runs for m in run.final.member_us_per_msg})
    rows = [[_member_part(runs, m), *[cell(run.final.member_us_per_msg.get(m), ",.2f")
                                      for run in runs]] for m in members]
    agents: dict[str, dict[str, str]] = {}  # an agent's row (by what it ran) -> run -> cell
    for run in runs:
        for agent in sorted(run.final.agents_cpu_percent):
            agents.setdefault(_agent_part(run, agent), {})[run.label] = cell(
                _agent_us(run.final, agent), ",.2f")
    rows += [[part, *[cells.get(run.label, "-") for run in runs]]
             for part, cells in agents.items()]
    rows.append(["total", *[cell(_total_us(run.final), ",.2f") for run in runs]])
    notes = ["figures of each run's final step"]
    if any("and" in run.manifest.agent_roles.get(a, "senders and receivers")
           for run in runs for a in run.final.agents_cpu_percent):
        notes.append("an agent that runs both kinds of worker has one figure for both")
    notes += [_link_note(run.label, run.manifest.link) for run in runs if run.manifest.link]
    return Table(["CPU us per transaction", *[run.label for run in runs]], rows, notes)


def _link_note(label: str, link: LinkRecord) -> str:
    """Where the link's CPU is, in a run's note."""
    if not link.runs_in:
        return (f"{label}: the link ({link.kind}s) runs inside each queue manager (its sender "
                "and receiver channel agents, as document 004's CHIN), so its CPU is in both "
                "members' rows; a message crossing is one more get on one side and put on the "
                "other")
    clients = ("each side's members also count the link as a client (side a: its consumer; "
               "side b: its publisher)")
    if link.side_of(link.runs_in):
        return (f"{label}: the link ({link.kind}s) runs inside {link.runs_in}, so its CPU is in "
                f"that member's row, and {clients}")
    return (f"{label}: the link ({link.kind}s) runs in a member of its own, {link.runs_in}, so "
            "its row is the link's CPU alone: an upper bound, since both its ends are network "
            f"clients (inside side b one end would be local); {clients}")


def _member_part(runs: list[Run], member: str) -> str:
    """A member's row: its side and the link where clusters are linked."""
    link = next((run.manifest.link for run in runs if run.manifest.link
                 and (run.manifest.link.side_of(member) or member == run.manifest.link.runs_in)),
                None)
    if link is None:
        return f"member {member}"
    if not link.side_of(member):
        return f"link ({link.kind}s, own member): member {member}"
    with_link = " + link" if member == link.runs_in or not link.runs_in else ""
    return f"broker {link.side_of(member)}{with_link}: member {member}"


def _agent_part(run: Run, agent: str) -> str:
    """An agent's row, with the workers it ran in ``run`` (requesters and responders for
    request/reply)."""
    if agent not in run.manifest.agent_roles:
        return f"agent {agent}"
    terms = run.manifest.terms
    role = run.manifest.agent_roles[agent].replace("senders", terms.senders).replace(
        "receivers", terms.receivers)
    return f"agent {agent} ({role})"
