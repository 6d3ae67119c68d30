"""What the tests that run surge on emulated IBM MQ over SSH share (tests/mqemu, NOT IBM MQ):
a real sshd serving two loopback hosts, the control command stand-ins (with IBM's exporter
beside each queue manager), the ``ibmmq`` topology fields that put queue managers on those
hosts, and ``surge`` in a fresh process whose MQI library is the emulator's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mqemu import end_all, install_standins
from tests.sshd import running_sshd

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("127.0.0.1", "127.0.1.2")  # two queue manager hosts behind one sshd
RUN_FLAGS = ["--no-live", "--json", "--metrics-port", "0", "--web", "off", "--no-analyze"]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """One sshd for a test module, reachable at both :data:`HOSTS`."""
    with running_sshd(tmp_path_factory.mktemp("sshd"), also=HOSTS[1:]) as server:
        yield server


@contextlib.contextmanager
def standins_in(directory: Path, exporter_offset: int,
                environment: dict[str, str] | None = None) -> Iterator[Path]:
    """The stand-ins installed in ``directory`` (exporters ``exporter_offset`` ports above
    their queue managers); on leaving, nothing they started may still run (surge takes down
    what it started), and whatever did is stopped."""
    bin_dir = install_standins(directory, environment, exporter_offset=exporter_offset)
    try:
        yield bin_dir
    finally:
        left = end_all(bin_dir)
    assert left == []  # surge took down every queue manager it started


def on_loopback(sshd, bin_dir: Path, tmp_path: Path, members: int, port_base: int,
                exporter_offset: int) -> dict:
    """The ``ibmmq`` fields that put ``members`` queue managers on the loopback hosts behind
    ``sshd`` (in blocks, as many on each as can be; ports from ``port_base`` on each host),
    run by the stand-ins in ``bin_dir``, publishing their statistics every second."""
    hosts = HOSTS[:min(members, len(HOSTS))]
    return {"port_base": port_base, "exporter_port_base": port_base + exporter_offset,
            "statistics_interval": 1, "bin_dir": str(bin_dir),
            "files_dir": str(tmp_path / "nfs1"),
            "hosts": [{"name": host, "members": members // len(hosts) + (i < members % len(hosts)),
                       "cpus": os.cpu_count()} for i, host in enumerate(hosts)],
            "ssh": {"port": sshd.port, "user": sshd.user, "key_file": str(sshd.key_file),
                    "known_hosts": "strict", "known_hosts_file": str(sshd.known_hosts_file),
                    "connect_timeout": 5, "command_timeout": 60, "retries": 0}}


def surge(args: list[str], tmp_path: Path, library: Path, timeout_s: float = 480
          ) -> subprocess.CompletedProcess:
    """``surge ARGS`` in a fresh process whose MQI library is the emulator's (state and runs
    under ``tmp_path``); it must succeed."""
    environment = {**os.environ, "LD_LIBRARY_PATH": str(library.parent), "MQIPY_NOOTEL": "1",
                   "SURGE_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], env=environment,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done
