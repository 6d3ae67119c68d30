"""The Spark session surge's analysis jobs run in: ``local[*]`` unless a master is given.

Spark's own output never reaches the console. The JVM surge starts writes its stdout and
stderr to a log file (appended; ``<runs>/spark.log`` for ``surge analyze``) and logs warnings and
errors there through ``spark-log4j2.properties`` (shipped beside this module). A driver that
``spark-submit`` started keeps that JVM and its logging as they are.

Nothing listens beyond this machine when nothing else needs to reach it: the web UI is off, and
with a master on this machine (``local[...]``, or a standalone master on a loopback address) the
driver's RPC and block manager bind to 127.0.0.1 (``spark.driver.bindAddress`` and
``spark.driver.host``, in a ``spark-submit`` driver too), and the JVM surge starts gets
``SPARK_LOCAL_IP`` and ``SPARK_LOCAL_HOSTNAME`` on loopback, so it has no hostname to warn about.
Py4J's gateway listens on loopback by itself.

The JVM surge starts maps a class-data archive of the classes an analysis loads (AppCDS), which
takes a third off a fresh ``surge analyze``. The first JVM without one writes it as it exits
(:func:`class_archive`); it is kept per Spark and Java installation.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
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
#: The JVM surge starts compiles with C1 only and collects with the serial collector: a pass is
#: seconds of small queries, where C2's warm-up costs more than it wins ($SURGE_SPARK_JAVA_OPTIONS
#: replaces them).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"}
LOOPBACK_SETTINGS = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}

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
    on_loopback = on_this_machine(conf.get("spark.master") or _submitted_master())
    if on_loopback:
        conf.setAll(list(LOOPBACK_SETTINGS.items()))
    if not _submitted():
        log.parent.mkdir(parents=True, exist_ok=True)
        archive = class_archive()
        options = f'-Dlog4j2.configurationFile="{LOG4J_CONFIG}" ' + os.environ.get(
            "SURGE_SPARK_JAVA_OPTIONS", JAVA_OPTIONS)
        conf.set("spark.driver.extraJavaOptions", f"{options} {archive.option}".strip())
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out, _environment(LOOPBACK if on_loopback else {}):
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
        SparkContext(conf=conf, gateway=gateway)
        if archive.writing:
            atexit.register(_stop_and_install, archive, gateway.proc)
    return SparkSession.builder.config(conf=conf).getOrCreate()


def _stop_and_install(archive: ClassArchive, jvm: subprocess.Popen) -> None:
    """At exit: stop this process's session, then install the archive its JVM writes."""
    with contextlib.suppress(Exception):
        _started.pop("session").stop()
    archive.install(jvm)


def on_this_machine(master: str) -> bool:
    """Whether ``master`` runs everything on this machine: ``local[...]``, or a standalone
    master (``spark://``) on a loopback address, whose workers can only be here too."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    return all(_loopback(address) for address in master.removeprefix("spark://").split(","))


def _loopback(address: str) -> bool:
    """Whether ``host:port`` names a loopback host."""
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _submitted_master() -> str:
    """The master ``spark-submit`` gave the JVM it started ("" if none, or no such JVM)."""
    if not _submitted():
        return ""
    from pyspark import SparkContext
    SparkContext._ensure_initialized()
    return SparkContext._jvm.System.getProperty("spark.master") or ""


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` in the environment (while the JVM starts); as it was afterwards."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


#: How long an exiting Python waits for its JVM to write the class-data archive.
ARCHIVE_WAIT_S = 120.0
#: An unfinished archive this old was left by a process that did not exit normally.
STALE_ARCHIVE_S = 3600.0


@dataclass(frozen=True)
class ClassArchive:
    """The class-data archive of this Spark and Java installation: ``path`` to map when it
    exists, else ``partial`` for this JVM to write as it exits, installed as ``path`` by
    :meth:`install` once the JVM has ended."""

    path: Path | None
    partial: Path | None = None

    @property
    def writing(self) -> bool:
        return self.partial is not None

    @property
    def option(self) -> str:
        """The JVM option that maps or writes the archive ("" for none)."""
        if self.partial is not None:
            return f'-XX:ArchiveClassesAtExit="{self.partial}"'
        return f'-XX:SharedArchiveFile="{self.path}"' if self.path else ""

    def install(self, jvm: subprocess.Popen) -> None:
        """Let ``jvm`` (its session stopped) exit and write the archive, then put it in place of
        any other installation's (an unfinished or failed one is removed)."""
        try:
            jvm.stdin.close()  # the gateway exits, and dumps, when its input closes
            jvm.wait(timeout=ARCHIVE_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if jvm.returncode == 0 and self.partial.exists() and self.partial.stat().st_size:
            os.replace(self.partial, self.path)
            for other in self.path.parent.glob("spark-*.jsa"):
                if other != self.path:
                    other.unlink(missing_ok=True)
        else:
            self.partial.unlink(missing_ok=True)


def class_archive() -> ClassArchive:
    """Where this installation's archive is, under ``$SURGE_SPARK_CLASS_CACHE`` (default
    ``~/.cache/surge``; ``off`` for none): mapped when it exists, else written by this JVM to a
    file of its own (unfinished ones an hour old are removed)."""
    setting = os.environ.get("SURGE_SPARK_CLASS_CACHE", "")
    if setting == "off":
        return ClassArchive(None)
    directory = Path(setting) if setting else Path(os.environ.get(
        "XDG_CACHE_HOME", Path.home() / ".cache")) / "surge"
    java = shutil.which("java", path=str(Path(os.environ["JAVA_HOME"]) / "bin")) \
        if os.environ.get("JAVA_HOME") else shutil.which("java")
    import pyspark
    key = hashlib.sha256("\0".join([pyspark.__version__, os.path.dirname(pyspark.__file__),
                                     os.path.realpath(java or "java")]).encode()).hexdigest()
    path = directory / f"spark-{key[:16]}.jsa"
    if path.exists():
        return ClassArchive(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("spark-*.partial"):
            if time.time() - old.stat().st_mtime > STALE_ARCHIVE_S:
                old.unlink(missing_ok=True)
    except OSError:
        return ClassArchive(None)  # no writable cache: the JVM starts as it would without
    return ClassArchive(path, directory / f"spark-{key[:16]}.{os.getpid()}.partial")
