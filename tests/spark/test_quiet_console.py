"""surge analyze keeps Spark off the console: the JVM's output and Spark's warnings go to the
runs directory's spark.log, and with --json stdout is the one JSON document. The first analysis
writes the class-data archive as its JVM exits, and the next one loads Spark's classes from it."""

import json
import os
import subprocess
import sys

from results.spark import JAVA_OPTIONS
from results.synthetic import write_run


def analyze(runs, cache, java_options=JAVA_OPTIONS):
    """``surge analyze --json`` of ``runs`` in a fresh process, with its class-data archive in
    ``cache``: the JSON document and the lines on stderr."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")}
    environment.update(SURGE_SPARK_CLASS_CACHE=str(cache), SURGE_SPARK_JAVA_OPTIONS=java_options)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "analyze", "--runs-dir", str(runs), "--json"],
        capture_output=True, text=True, timeout=280, env=environment)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr.splitlines()  # the whole of stdout


def stages(lines: list[str]) -> list[str]:
    """The progress lines (stage names; a long stage's lines with its time are left out)."""
    return [line for line in lines if line.startswith("analyse: ") and not line.endswith(" s)")]


def own(lines: list[str]) -> list[str]:
    """The other lines, each cut to its fixed start; every line is either kind."""
    rest = [line for line in lines if not line.startswith("analyse: ")]
    return [line[:line.index(": ") + 2] if line.startswith("synthetic") else line[:11]
            for line in rest]


def test_analyze_prints_no_spark_lines_and_logs_them(tmp_path):
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    write_run(runs / "synthetic", seconds=20, phase_s=10, second_member_at=15, samples=50)
    document, lines = analyze(runs, cache)
    assert document["analysed"] == [str(runs / "synthetic")]
    assert own(lines) == ["synthetic: ", "analysed 1,"], lines  # nothing from Spark or the JVM
    assert stages(lines) == ["analyse: reading the runs (1)", "analyse: starting Spark",
                             "analyse: Spark job over 1 run", "analyse: reports and plots (1)",
                             "analyse: committing to the results lake"], lines
    log = (runs / "spark.log").read_text()
    assert " WARN " in log  # Spark's warnings are kept, in the log
    assert "resolves to a loopback address" not in log  # a local Spark binds to loopback
    archives = [p.name for p in cache.iterdir()]
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives  # no unfinished one

    write_run(runs / "second", seconds=20, phase_s=10, samples=50, seed=3)
    loaded = tmp_path / "classes.log"
    document, lines = analyze(runs, cache, f"{JAVA_OPTIONS} -Xlog:class+load=info:file={loaded}")
    assert document["analysed"] == [str(runs / "second")] and len(own(lines)) == 2, lines
    shared = [line for line in loaded.read_text().splitlines()
              if "org.apache.spark.sql.SparkSession " in line]
    assert shared and "shared objects file (top)" in shared[0], shared
