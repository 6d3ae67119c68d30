"""tests/integration/test_mq_real.py, the test written for a real queue manager, run as its
docstring tells a user with MQ to run it, against an emulated queue manager (tests/mqemu, NOT
IBM MQ) with IBM's ibmmq over the emulator's library: so that test is known to run, every one
of its cases, and to pass where the MQI behaves as the reference says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_mqemu_driver import write_ccdt

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "app", "passw0rd"


def test_the_real_queue_manager_test_runs_whole_on_an_emulated_one(mqemu_library, qmgrs,
                                                                     tmp_path):
    qmgr = qmgrs.start("QM1", USER, PASSWORD,
                       [f"DEFINE QLOCAL(DEV.QUEUE.{n})" for n in (1, 2, 3)])
    ccdt = write_ccdt(tmp_path / "ccdt.json", [("DEV.APP.SVRCONN", "QM1", qmgr, 0)])
    environment = {**os.environ, "LD_LIBRARY_PATH": str(mqemu_library.parent),
                   "MQIPY_NOOTEL": "1", "MQ_INSTALLATION_PATH": str(mqemu_library.parent),
                   "PYTHONPATH": str(ROOT), "SURGE_MQ_QMGR": "QM1",
                   "SURGE_MQ_CHANNEL": "DEV.APP.SVRCONN", "SURGE_MQ_CONNAME": qmgr.conname,
                   "SURGE_MQ_USER": USER, "SURGE_MQ_PASSWORD": PASSWORD,
                   "SURGE_MQ_CCDT_URL": ccdt}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
         "-rs", str(ROOT / "tests" / "integration" / "test_mq_real.py")],
        env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert summary.startswith("3 passed") and "skipped" not in summary, done.stdout[-2000:]
