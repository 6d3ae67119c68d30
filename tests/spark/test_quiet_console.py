"""surge analyze keeps Spark off the console: the JVM's output and Spark's warnings go to the
runs directory's spark.log, and with --json stdout is the one JSON document."""

import json
import os
import subprocess
import sys

from results.synthetic import write_run


def test_analyze_prints_no_spark_lines_and_logs_them(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "synthetic", seconds=20, phase_s=10, second_member_at=15, samples=50)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "analyze", "--runs-dir", str(runs), "--json"],
        capture_output=True, text=True, timeout=280,
        env={k: v for k, v in os.environ.items()
             if k not in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)  # the whole of stdout
    assert document["analysed"] == [str(runs / "synthetic")]
    lines = done.stderr.splitlines()
    assert lines[0].startswith("synthetic: ") and lines[1].startswith("analysed 1,"), lines
    assert len(lines) == 2, lines  # surge's own two lines, nothing from Spark or the JVM
    log = (runs / "spark.log").read_text()
    assert " WARN " in log  # Spark's warnings are kept, in the log
    assert "resolves to a loopback address" not in log  # a local Spark binds to loopback
