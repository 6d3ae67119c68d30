"""A Spark on this machine listens on loopback only: the session surge starts, and the driver of a
``spark-submit --master local[1]`` (whose JVM surge did not start, so only Spark settings reach
it). The machine's hostname decides where an unconfigured Spark binds, so neither test sets
``SPARK_LOCAL_IP``."""

import ipaddress
import os
import selectors
import subprocess
import sys
from pathlib import Path

import psutil

from results.spark import on_this_machine

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import os, sys, time
from pathlib import Path
from results.spark import session
session().range(3).count()
print(os.getppid(), flush=True)  # spark-submit's JVM runs this file
while not Path(sys.argv[1]).exists():  # the JVM gives this process no standard input
    time.sleep(0.1)
"""


def listening(pid: int) -> list[str]:
    """The addresses that process ``pid`` and its descendants listen on over TCP."""
    jvm = psutil.Process(pid)
    return [c.laddr.ip for p in [jvm, *jvm.children(recursive=True)]
            for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN]


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def test_the_session_jvm_listens_on_loopback_only(spark):
    spark.range(3).count()
    (jvm,) = [p for p in psutil.Process().children() if p.name() == "java"]
    addresses = listening(jvm.pid)
    assert len(addresses) >= 3, addresses  # Py4J, the driver's RPC, its block manager
    assert [a for a in addresses if not loopback(a)] == []


def test_a_spark_submit_driver_in_local_mode_listens_on_loopback_only(tmp_path):
    import pyspark
    spark_home = os.path.dirname(pyspark.__file__)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "SURGE_SPARK_MASTER")}
    env.update(SPARK_HOME=spark_home, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    with open(tmp_path / "spark.log", "wb") as log:
        submit = subprocess.Popen(
            [f"{spark_home}/bin/spark-submit", "--master", "local[1]",
             "--conf", "spark.driver.memory=512m", str(tmp_path / "driver.py"),
             str(tmp_path / "done")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(submit.stdout, selectors.EVENT_READ)
            assert selector.select(240), "the driver did not start a session"
        line = submit.stdout.readline().decode()
        assert line.strip().isdigit(), (line, (tmp_path / "spark.log").read_text()[-3000:])
        jvm = int(line)
        assert psutil.Process(jvm).name() == "java"
        addresses = listening(jvm)
        assert len(addresses) >= 3, addresses
        assert [a for a in addresses if not loopback(a)] == []
        (tmp_path / "done").touch()
        assert submit.wait(60) == 0
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()


def test_which_masters_keep_spark_on_this_machine():
    assert on_this_machine("local[*]") and on_this_machine("local-cluster[2,1,1024]")
    assert on_this_machine("spark://127.0.0.1:7077") and on_this_machine("spark://[::1]:7077")
    assert not on_this_machine("spark://spark-master:7077")
    assert not on_this_machine("spark://127.0.0.1:7077,10.0.0.2:7077")
    assert not on_this_machine("spark://127.example.com:7077")
    assert not on_this_machine("yarn")
