"""The same analysis job on a Spark standalone master and worker (real JVMs on loopback, their
web UIs too)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from results.synthetic import write_run


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_class(spark_home: str, log: Path, *args: str) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([f"{spark_home}/bin/spark-class", *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                env={**os.environ, "SPARK_HOME": spark_home,
                                     "SPARK_LOCAL_IP": "127.0.0.1"})  # web UIs too


def _await_line(log: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{log}: no {text!r} within {timeout_s:.0f} s")


def _stop(process: subprocess.Popen) -> None:
    """The JVM and whatever it started (executors), by process group."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def test_analyze_on_a_standalone_master_matches_local(spark, tmp_path):
    import pyspark
    spark_home = os.path.dirname(pyspark.__file__)
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = _spark_class(spark_home, tmp_path / "master.log",
                          "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(_free_port()))
    worker = None
    try:
        _await_line(tmp_path / "master.log", "I have been elected leader", 90)
        worker = _spark_class(spark_home, tmp_path / "worker.log",
                              "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                              "--cores", "1", "--memory", "1g",
                              "--webui-port", str(_free_port()), master_url)
        _await_line(tmp_path / "worker.log", "Successfully registered with master", 90)
        runs = tmp_path / "runs"
        write_run(runs / "synthetic")
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "analyze", "--runs-dir", str(runs),
             "--spark-master", master_url], capture_output=True, text=True, timeout=240,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "Asked to launch executor" in (tmp_path / "worker.log").read_text()  # it ran there
        remote = json.loads((runs / "synthetic" / "analysis" / "analysis.json").read_text())
        from results.analysis import analyze_run
        local = analyze_run(spark, runs / "synthetic", price_per_core_hour=0.04)
        assert [s["label"] for s in remote["steps"]] == [s.label for s in local.steps]
        for theirs, ours in zip(remote["steps"], local.steps, strict=True):
            for key in ("achieved_rate", "p99_ms", "p999_ms", "balance"):
                assert theirs[key] == pytest.approx(getattr(ours, key)), key
    finally:
        for process in (worker, master):
            if process is not None:
                _stop(process)
    assert not [p for p in (master.pid, worker.pid if worker else 0) if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
