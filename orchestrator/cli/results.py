"""``surge analyze``, ``query``, ``compare``, ``table``, ``view`` and ``export-hlog``: finished
runs analysed, asked, compared, put in the documents' tables, shown again and handed to
HdrHistogram's tools."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import (
    JsonOption,
    WebOption,
    print_json,
    say,
    surge_errors,
    web_address,
)
from orchestrator.errors import FileError
from orchestrator.specs.prices import MAX_PRICE_PER_CORE_HOUR
from orchestrator.specs.units import parse_duration

MIN_WATCH_S = 1.0
"""Shortest pause between two passes of ``surge analyze --watch``."""

group = typer.Typer()


def _interval(watch: str | None) -> float | None:
    """``--watch`` in seconds (None: one pass)."""
    if watch is None:
        return None
    try:
        interval = parse_duration(watch)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--watch") from None
    if interval < MIN_WATCH_S:
        raise typer.BadParameter(f"at least {MIN_WATCH_S:g}s between passes (got {watch!r})",
                                 param_hint="--watch")
    return interval


@group.command()
@surge_errors
def analyze(runs: Annotated[list[Path] | None, typer.Argument(
                help="Run directories (default: every run under --runs-dir)")] = None,
            runs_dir: Annotated[Path, typer.Option(help="Where runs are")] = Path("runs"),
            force: Annotated[bool, typer.Option(
                help="Analyse again even runs that have not changed")] = False,
            price_per_core_hour: Annotated[float, typer.Option(
                min=0, max=MAX_PRICE_PER_CORE_HOUR,
                help="Price of one core for one hour, for cost per 1,000 msg/s per month")]
            = 0.04,
            spark_master: Annotated[str | None, typer.Option(
                help="Spark master URL (default: $SURGE_SPARK_MASTER or local[*])")] = None,
            watch: Annotated[str | None, typer.Option(
                help="Keep analysing new runs every interval, e.g. 5m (at least 1s)")] = None,
            compare: Annotated[bool, typer.Option(
                "--compare", help="Then compare the runs: mean, stdev, min, max, change % per "
                                  "figure, and a ranking by cost among runs that met target")]
            = False,
            include_drain: Annotated[bool, typer.Option(
                "--include-drain", help="Count the drain (before the first step and after the "
                                        "last) in the cost; with --force for analysed runs")]
            = False,
            json_output: JsonOption = False,
            ) -> None:
    """Analyse runs with Spark: step table with merged-histogram latency percentiles, members
    and balance, cost per message, scale-out reaction times, report.md and PNG plots in
    <run>/analysis/. Only new or changed runs are analysed; a bad run is reported and skipped.
    Spark's own log goes to spark.log in the runs' directory, not to the console. Needs
    surge's analysis extra (pip install 'surge[analysis]') and Java 17 or later.

    With --json, stdout holds one document: analysed, reports, up_to_date, failed (run: why),
    problems, seconds, and with --compare statistics and ranking; with --watch, one such
    document per pass, each on one line.
    """
    # Spark's pipeline and the lake: loaded only to analyse
    from results.passes import Pass, analyze_passes
    interval = _interval(watch)
    lines = say(json_output)

    def show(done: Pass) -> None:
        lines(done.line())
        if json_output:
            print_json(done.document(compare), one_line=interval is not None)
        elif compare:
            typer.echo("\n" + done.comparison_text())

    from orchestrator.cli.progress import StageProgress
    with StageProgress("analyse") as progress:
        last = analyze_passes(runs, runs_dir, show, interval, price_per_core_hour, force, lines,
                              spark_master, include_drain, progress=progress)
    if last.summary.failed:
        raise typer.Exit(1)


@group.command()
@surge_errors
def query(sql: Annotated[str, typer.Argument(
              help="Spark SQL over the lake's tables: runs, steps, members, latency, cost, "
                   "events")],
          runs_dir: Annotated[Path, typer.Option(help="The runs root whose lake to read")]
          = Path("runs"),
          csv_output: Annotated[bool, typer.Option("--csv", help="Print CSV, not a table")]
          = False,
          spark_master: Annotated[str | None, typer.Option(
              help="Spark master URL (default: $SURGE_SPARK_MASTER or local[*])")] = None,
          ) -> None:
    """Ask the results lake your own question with Spark SQL: every run surge analyze has
    seen under --runs-dir, one view per table (columns in README, "The results lake").

    For example, the runs that lost nothing, cheapest per 1,000 msg/s first:

    \b
      surge query "SELECT run_id, broker_cost_per_1k_msg_s_month AS cost
        FROM runs JOIN cost USING (run_id) WHERE lost = 0 ORDER BY cost"
    """
    from results.query import query_text  # the lake through Spark
    typer.echo(query_text(runs_dir, sql, spark_master, csv_format=csv_output), nl=not csv_output)


@group.command()
@surge_errors
def compare(runs: Annotated[list[Path], typer.Argument(
                help="Run directories, e.g. runs/*-uniform-*; with --gate: BASELINE and "
                     "CANDIDATE, each a directory of repeated runs (a campaign's)")],
            json_output: JsonOption = False,
            gate: Annotated[bool, typer.Option(
                "--gate", help="exit 3 when CANDIDATE is worse than BASELINE beyond "
                               "--threshold with --confidence (bootstrap over the runs)")] = False,
            threshold: Annotated[float, typer.Option(
                help="with --gate: the change (%) a figure may worsen by")] = 3.0,
            confidence: Annotated[float, typer.Option(
                help="with --gate: the confidence (%) of the interval")] = 95.0,
            plot: Annotated[bool, typer.Option(
                "--plot", help="Also draw the runs overlaid, one line per run: "
                               "compare-rate.png, compare-latency.png and compare-cpu.png in "
                               "--out")] = False,
            out: Annotated[Path, typer.Option(
                "--out", "-o", help="with --plot: the directory the PNGs go to (made if "
                                    "missing; files of the same name are replaced)")]
            = Path("compare-plots")) -> None:
    """Compare finished runs at their final step: target and achieved msg/s, members, CPU%.

    The shape of document 000's Table 2, e.g. the scaling test against its fixed-rate variants.
    With --json, a list with one object per run (run_dir, test, target_rate, achieved_rate,
    members, member_cpu_percent_mean, host_cpu_percent, p99_ms, accounting; null = unknown).

    With --gate, a regression gate for CI: BASELINE and CANDIDATE are directories of at least 3
    repetitions each, or quoted patterns naming them; per figure (achieved msg/s, p99 ms, and
    CPU us/msg once analysed) the change of the means with its bootstrap interval; exit status
    3 when a figure is worse beyond the threshold with that confidence. Sides run at different
    times see different host load: an A/B campaign (a matrix of the two) runs them interleaved,
    repetition by repetition, so both sides share the noise, e.g.

    \b
      surge compare --gate campaigns/before campaigns/after --threshold 3 --confidence 95
      surge compare --gate 'campaigns-runs/ab/*persistent=false*' \\
                           'campaigns-runs/ab/*persistent=true*'

    With --plot, the runs overlaid as PNGs in --out (default ./compare-plots), a legend entry
    per run by its directory's name: the consumed rate over time (target dashed), p99 against
    the achieved rate of each step, and the members' mean CPU over time, e.g.

      surge compare runs/*-quickstart --plot -o plots
    """
    if gate:
        if plot:
            raise typer.BadParameter("--plot draws runs, not a gate's two sides",
                                     param_hint="--plot")
        _gate(runs, threshold / 100, confidence / 100, json_output)
        return
    from results.compare import as_text, final_rows  # the run directories' tables
    if json_output:
        print_json(final_rows(runs))
    else:
        typer.echo(as_text(runs))
    if plot:
        from results.compare import plot as plot_runs  # matplotlib: only to plot
        written = plot_runs(runs, out)
        say(json_output)(f"plots: {', '.join(str(path) for path in written)}")


@group.command()
@surge_errors
def table(name: Annotated[str | None, typer.Argument(
              help="The document table, e.g. 000-table1, 003-round-trips, 004-cost; leave it "
                   "out to list them")] = None,
          runs: Annotated[list[Path] | None, typer.Argument(
              help="Run directories, e.g. campaigns-runs/uniform-cluster-table2/*")] = None,
          json_output: JsonOption = False,
          plot: Annotated[Path | None, typer.Option(
              "--plot", help="Also draw the document's figures of the table (003-round-trips: "
                             "round trips/s and broker CPU by requester count; 004-cost: cost "
                             "and rate by queue pairs) as PNGs in this directory")] = None
          ) -> None:
    """Print a source document's table, in its own columns, from finished runs.

    Each document's table has a name (surge table lists them): 000-table1 gives a row per
    step (target, achieved, members, each broker host's CPU), 000-table2 a row per run (a
    campaign's cells), 003-round-trips the round trips/s per requester count with a column
    pair per run (single instance against Native HA, each CPU limit), 003-results the
    cphtestp results.csv row per step, 004-cost the cost per transaction as queue pairs grow,
    004-split that cost by part, 002-spread the messages each queue instance delivered.
    Figures a run did not record are "-"; the document's columns surge does not measure here
    are named under the table. With --json, a list of rows by column name, e.g.

    \b
      surge table 003-round-trips runs/*-native-ha-requester-sweep
      surge table 000-table2 campaigns-runs/uniform-cluster-table2/* --json
      surge table 004-cost campaigns-runs/zos-queue-pairs/* --plot plots
    """
    from results.documents import document_table, listing
    if name is None:
        typer.echo(listing())
        return
    if not runs:
        raise typer.BadParameter("give the run directories to read", param_hint="RUNS")
    built = document_table(name, runs)
    if json_output:
        print_json(built.csv_rows())
    else:
        typer.echo(built.text())
    if plot is not None:
        from results.documents import plot_table  # matplotlib: only to plot
        written = plot_table(name, runs, plot)
        say(json_output)(f"plots: {', '.join(map(str, written))}" if written
                         else f"{name} has no figures to draw")


def _gate(sides: list[Path], threshold: float, confidence: float, json_output: bool) -> None:
    """``surge compare --gate BASELINE CANDIDATE``; exit 3 when the candidate is worse."""
    from dataclasses import asdict

    from results.gate import gate, gate_text  # the run directories' tables
    if len(sides) != 2:
        raise typer.BadParameter(f"--gate takes BASELINE and CANDIDATE ({len(sides)} given)",
                                 param_hint="RUNS")
    if not 0 < confidence < 1 or threshold < 0:
        raise typer.BadParameter("expected a confidence between 0 and 100 % and a threshold "
                                 "of at least 0 %", param_hint="--confidence/--threshold")
    verdicts = gate(sides[0], sides[1], threshold, confidence)
    if json_output:
        print_json([asdict(v) for v in verdicts])
    else:
        typer.echo(gate_text(verdicts, threshold, confidence))
    if any(v.worse for v in verdicts):
        raise typer.Exit(3)


@group.command()
@surge_errors
def view(run_dir: Annotated[Path, typer.Argument(help="A run directory, e.g. runs/<run id>")],
         web: WebOption = "127.0.0.1:0") -> None:
    """Serve the page of a recorded run (the live page, from the run directory's rows, events,
    steps and accounting, with its analysis plots) until Ctrl-C.

    A finished run's page opens on its result: the final step's target, achieved rate (msg/s
    and %), p50/p99 and the accounting's verdict, then the step table and the accounting, then
    the charts (legends show the last values; a second far above the rest is marked at the top
    of the rate chart rather than stretching its scale)."""
    from orchestrator.web.recorded import serve_recorded  # the run directory's tables
    address = web_address(web)
    if address is None:
        raise typer.BadParameter("surge view needs an address to serve on", param_hint="--web")
    serve_recorded(run_dir, address, typer.echo)


@group.command()
@surge_errors
def export_hlog(run_dir: Annotated[Path, typer.Argument(
                    help="A run directory, e.g. runs/<run id>")],
                output: Annotated[Path, typer.Option(
                    "--output", "-o", help="Where to write the log ('-': stdout)")] = Path("-"),
                kind: Annotated[list[str] | None, typer.Option(
                    help="A latency kind to export, repeatable: latency (from the actual send "
                         "time), intended (from the intended send time), confirm (publish to "
                         "confirm) [default: every kind the run recorded]")] = None,
                ) -> None:
    """Write a run's latency as an HdrHistogram interval log (.hlog): one line per second
    of the run (its ticks) and latency kind, tagged latency, intended or confirm, each an
    HdrHistogram of that second's latencies in microseconds (1 µs lowest discernible value,
    3 significant digits; Interval_Max in ms). Each surge bucket's count is kept exactly, so
    a reader's percentiles land in the same bucket as surge's own (within 0.1% or 1 µs). Steps are
    named in comment lines, in seconds after the log's StartTime.

    HdrHistogram's tools read it. HistogramLogAnalyzer opens run.hlog itself (one series per
    tag; values in µs). HistogramLogProcessor makes the percentile distribution (run.hgrm) of
    a tag over a time range (s after StartTime), here in ms, to plot with HdrHistogram's
    plotFiles.html or hdr-plot:

    \b
      surge export-hlog runs/<run id> -o run.hlog
      java -cp HdrHistogram.jar org.HdrHistogram.HistogramLogProcessor \\
        -i run.hlog -tag intended -start 20 -end 80 -outputValueUnitRatio 1000 -o run
      hdr-plot --units ms --output latency.png run.hgrm
    """
    from results.hdrlog import KINDS, export  # the run directory's tables
    for name in kind or []:
        if name not in KINDS:
            raise typer.BadParameter(f"{name!r}: expected one of {', '.join(KINDS)}",
                                     param_hint="--kind")
    text, written = export(run_dir, kind)
    if str(output) == "-":
        typer.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as failure:
            raise FileError(f"{output}: cannot write the log ({failure.strerror})") from None
    tags = list(dict.fromkeys(interval.tag for interval in written))
    typer.echo(f"{len(written) // len(tags):,} intervals of about 1 s per tag "
               f"({', '.join(tags)}) "
               f"written to {'stdout' if str(output) == '-' else output}", err=True)
