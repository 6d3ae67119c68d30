"""The Spark session surge's analysis jobs run in: ``local[*]`` unless a master is given.

Spark's own output never reaches the console. The JVM surge starts writes its stdout and
stderr to a log file (appended; ``<runs>/spark.log`` for ``surge analyze``), logs warnings and
errors there through ``spark-log4j2.properties`` (shipped beside this module), and, with a local
master, binds to loopback (``SPARK_LOCAL_IP``, ``SPARK_LOCAL_HOSTNAME``, unless already set), so
it has no hostname to warn about. A driver that ``spark-submit`` started keeps that JVM and its
logging as they are.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

DEFAULT_MASTER = "local[*]"
LOG4J_CONFIG = Path(__file__).with_name("spark-log4j2.properties")
#: Where the JVM's output goes when the caller names no log file.
DEFAULT_LOG = Path(tempfile.gettempdir()) / f"surge-spark-{os.getuid()}.log"
SETTINGS = {  # small shuffles (a run is thousands of rows, not billions), no UI
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
}
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"}

_started: dict[str, object] = {}  # "session" and "log" of this process, once started


def session(master: str | None = None, log_file: Path | None = None):
    """One SparkSession per process. The master is ``master``, else ``$SURGE_SPARK_MASTER``,
    else the one ``spark-submit --master`` set, else ``local[*]``. ``log_file`` (default
    :data:`DEFAULT_LOG`) takes the JVM's output when this call starts it."""
    if "session" not in _started:
        log = log_file or DEFAULT_LOG
        _started["session"] = _start(master, log)
        _started["log"] = log
    return _started["session"]


def log_file() -> Path | None:
    """Where the running session's JVM writes its output (None: no session, or spark-submit's
    JVM)."""
    return _started.get("log") if not _submitted() else None


def _submitted() -> bool:
    """Whether ``spark-submit`` started this driver (its JVM is running already)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _start(master: str | None, log: Path):
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession
    conf = SparkConf().setAppName("surge-analyze").setAll(list(SETTINGS.items()))
    chosen = master or os.environ.get("SURGE_SPARK_MASTER")
    if chosen or not _submitted():
        conf.setMaster(chosen or DEFAULT_MASTER).set(
            "spark.driver.memory", os.environ.get("SURGE_SPARK_DRIVER_MEMORY", "2g"))
    if not _submitted():
        conf.set("spark.driver.extraJavaOptions", f'-Dlog4j2.configurationFile="{LOG4J_CONFIG}"')
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out, _loopback(conf.get("spark.master", "")):
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
        SparkContext(conf=conf, gateway=gateway)
    return SparkSession.builder.config(conf=conf).getOrCreate()


@contextlib.contextmanager
def _loopback(master: str) -> Iterator[None]:
    """With a local master, ``SPARK_LOCAL_IP`` and ``SPARK_LOCAL_HOSTNAME`` on loopback (those
    not set already) while the JVM starts; the environment as it was afterwards."""
    added = {name: value for name, value in LOOPBACK.items()
             if master.startswith("local") and name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)
