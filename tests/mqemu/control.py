"""IBM MQ's control commands over EMULATED queue managers (tests only; NOT IBM MQ): what the
stand-ins of tests/integration/mq_standin_bin run, ``control.py COMMAND ARGS...``.

- ``crtmqm [-lc] -p PORT [-ii INI] [-ic MQSC] [-iv KEY=VALUE]... QM`` records the queue manager
  (its listener port, its -ic file and -iv inserts) in ``$MQ_STANDIN_STATE/QM.json``.
- ``strmqm QM`` starts qmgr.py for it (in the cgroup of the slice ``systemd-run --slice``
  named, tests/mqemu/slices.py), listening on the host and port of its ``CONNAME``
  insert (else 127.0.0.1 and ``-p``), running the -ic file with MQ's inserts replaced
  (``+QMNAME+``, ``+CONNAME+``, ``+AUTOCL+`` from the -ii file's ``ClusterName``), as a queue
  manager runs its -ic file at every start. A -ii file with ``Type=Uniform`` makes it balance
  applications over the cluster's running members (rebalance.py; ``MQEMU_REBALANCE_INTERVAL_S``
  sets the seconds between rounds).
- ``endmqm [-i|-r|-w|-p] QM`` ends it (``END``: its clients lose their connections, and
  reconnectable ones move on, as with ``-r``); ``-p`` kills the process.
- ``dspmq [-m QM]``, ``runmqsc [-e] QM`` (stdin's MQSC to the running emulator),
  ``dltmqm QM``.

Messages and exit codes follow MQ's where the stand-ins' callers read them (AMQ7048E and 72 for
an unknown queue manager, AMQ8146E and 20 for runmqsc on one not running, dspmq's
``QMNAME(...) STATUS(...)``). Nothing survives a restart: the emulator keeps messages in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from tests.mqemu import admin, stop_pid  # noqa: E402  (run as a script)
from tests.mqemu.slices import joining  # noqa: E402

STATE = Path(os.environ.get("MQ_STANDIN_STATE", HERE / "state"))
START_TIMEOUT_S = 20.0
END_TIMEOUT_S = 15.0
UNKNOWN = "AMQ7048E: The queue manager name is either not valid or not known."
NOT_AVAILABLE = "AMQ8146E: IBM MQ queue manager not available."


def _record(name: str) -> dict | None:
    path = STATE / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _save(name: str, record: dict) -> None:
    (STATE / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")


def _alive(record: dict) -> bool:
    pid = record.get("pid")
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return ") Z " not in stat  # a zombie has ended


def _address(record: dict) -> tuple[str, int]:
    """Where the queue manager listens: where strmqm started it, else (starting it) its
    CONNAME insert's first entry. A real queue manager listens on every interface of its host;
    an emulated host is the loopback address SSH reached it at (``SSH_CONNECTION``'s server
    address), unless the CONNAME names a loopback address itself."""
    if record.get("listen"):
        return record["listen"][0], record["listen"][1]
    found = re.match(r"\s*([^(,\s]+)\((\d+)\)", record["inserts"].get("CONNAME", ""))
    host, port = (found.group(1), int(found.group(2))) if found else ("", record["port"])
    if not host.startswith("127."):
        session = os.environ.get("SSH_CONNECTION", "").split()
        host = session[2] if len(session) == 4 and session[2].startswith("127.") else "127.0.0.1"
    return host, port


class Refused(Exception):
    """A command refused: MQ's message (on stderr) and exit status."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _known(name: str) -> dict:
    """What crtmqm recorded of ``name``; refused as MQ refuses an unknown queue manager."""
    record = _record(name)
    if record is None:
        raise Refused(UNKNOWN, 72)
    return record


def crtmqm(args: list[str]) -> int:
    """Record a queue manager (not started)."""
    name, options = args[-1], args[:-1]
    record: dict = {"port": 1414, "ini": None, "mqsc": None, "inserts": {},
                    "status": "Ended immediately", "pid": None}
    values = iter(options)
    for option in values:
        if option == "-p":
            record["port"] = int(next(values))
        elif option == "-ii":
            record["ini"] = next(values)
        elif option == "-ic":
            record["mqsc"] = next(values)
        elif option == "-iv":
            key, _, value = next(values).partition("=")
            record["inserts"][key] = value
    failing = STATE / "fail-crtmqm"
    if failing.exists() and name in failing.read_text().split():
        raise Refused("AMQ8101S: IBM MQ error (893) has occurred: no space left on device.", 71)
    if _record(name) is not None:
        raise Refused(f"AMQ8110E: IBM MQ queue manager '{name}' already exists.", 8)
    _save(name, record)
    print(f"IBM MQ queue manager '{name}' created.")
    return 0


def _autocluster(ini: str | None, key: str) -> str:
    """A value of the -ii file (its ``AutoCluster:`` stanza's ``ClusterName``, ``Type``)."""
    if not ini or not Path(ini).exists():
        return ""
    found = re.search(rf"^\s*{key}=(\S+)", Path(ini).read_text(), re.MULTILINE)
    return found.group(1) if found else ""


def _publish_interval(ini: str | None) -> float:
    """``TuningParameters: MonitorPublishHeartBeat`` of the -ii file (MQ's default: 10 s)."""
    if ini and Path(ini).exists():
        found = re.search(r"^\s*MonitorPublishHeartBeat=(\d+(?:\.\d+)?)", Path(ini).read_text(),
                          re.MULTILINE)
        if found:
            return float(found.group(1))
    return 10.0


def _start_exporter(name: str, record: dict, host: str, port: int, pid: int) -> int | None:
    """IBM's exporter over the queue manager (tests/mqemu/exporter.py), on its listener port
    plus ``MQEMU_EXPORTER_OFFSET`` (unset: no exporter); its PID."""
    offset = os.environ.get("MQEMU_EXPORTER_OFFSET")
    if not offset:
        return None
    data = STATE / f"{name}.data"
    command = [sys.executable, str(HERE / "exporter.py"), "--qmgr", name, "--qmgr-port",
               str(port), "--pid", str(pid), "--host", host, "--port", str(port + int(offset)),
               "--interval", f"{_publish_interval(record['ini']):g}"]
    with (data / "exporter.log").open("ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process.pid


def _cluster_name(ini: str | None) -> str:
    return _autocluster(ini, "ClusterName")


def _balancing(record: dict) -> list[str]:
    """qmgr.py's options for a member of a uniform cluster (``Type=Uniform``): it balances
    applications over the cluster, every ``MQEMU_REBALANCE_INTERVAL_S`` seconds if set."""
    cluster = _cluster_name(record["ini"])
    if not cluster or _autocluster(record["ini"], "Type").lower() != "uniform":
        return []
    interval = os.environ.get("MQEMU_REBALANCE_INTERVAL_S")
    return ["--uniform", cluster] + (["--rebalance-interval", interval] if interval else [])


def _start_script(name: str, record: dict) -> Path | None:
    """The -ic file with the inserts a queue manager replaces in it."""
    if not record["mqsc"] or not Path(record["mqsc"]).exists():
        return None
    text = Path(record["mqsc"]).read_text()
    inserts = {"QMNAME": name, "AUTOCL": _cluster_name(record["ini"]), **record["inserts"]}
    for key, value in inserts.items():
        text = text.replace(f"+{key}+", value)
    script = STATE / f"{name}.start.mqsc"
    script.write_text(text)
    return script


def strmqm(args: list[str]) -> int:
    """Start the emulated queue manager and wait until it listens."""
    name = args[-1]
    record = _known(name)
    if _alive(record):
        raise Refused(f"IBM MQ queue manager '{name}' running.", 5)
    host, port = _address(record)
    data = STATE / f"{name}.data"
    command = [sys.executable, str(HERE / "qmgr.py"), "--name", name, "--host", host,
               "--port", str(port), "--data", str(data), "--peers", str(STATE / "peers"),
               *_balancing(record)]
    script = _start_script(name, record)
    if script is not None:
        command += ["--mqsc", str(script)]
    data.mkdir(exist_ok=True)
    with (data / "qmgr.log").open("ab") as log:  # in its slice's cgroup, if systemd-run said
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=joining(STATE, os.environ.get("MQEMU_SLICE")))
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise Refused(f"AMQ7017S: Log not available (the emulated queue manager did not "
                              f"listen on {host}({port}); see {data / 'qmgr.log'}).", 71) from None
            time.sleep(0.05)
    stop_pid(record.get("exporter_pid"), "exporter.py")  # one left by a queue manager that died
    record.update(pid=process.pid, status="Running", listen=[host, port],
                  exporter_pid=_start_exporter(name, record, host, port, process.pid))
    _save(name, record)
    print(f"IBM MQ queue manager '{name}' started (emulated, NOT IBM MQ).")
    return 0


def endmqm(args: list[str]) -> int:
    """End the queue manager: its clients lose their connections."""
    name, flags = args[-1], args[:-1]
    record = _known(name)
    if not _alive(record):
        raise Refused(f"AMQ8146E: IBM MQ queue manager '{name}' not available.", 40)
    host, port = _address(record)
    if "-p" not in flags:
        with contextlib.suppress(OSError):  # it may be going already
            admin(port, "END", host=host)
    deadline = time.monotonic() + (0 if "-p" in flags else END_TIMEOUT_S)
    while _alive(record) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(record):
        os.kill(record["pid"], signal.SIGKILL)
    stop_pid(record.get("exporter_pid"), "exporter.py")
    ended = "Ended immediately" if {"-i", "-p"} & set(flags) else "Ended normally"
    record.update(pid=None, listen=None, exporter_pid=None, status=ended)
    _save(name, record)
    print(f"IBM MQ queue manager '{name}' ended.")
    return 0


def dspmq(args: list[str]) -> int:
    """``QMNAME(QM)   STATUS(Running)`` for ``-m QM``, or for every queue manager."""
    names = [args[args.index("-m") + 1]] if "-m" in args else \
        sorted(p.stem for p in STATE.glob("*.json"))
    for name in names:
        record = _known(name)
        status = "Running" if _alive(record) else (
            "Ended unexpectedly" if record["status"] == "Running" else record["status"])
        print(f"QMNAME({name})".ljust(60) + f"STATUS({status})")
    return 0


def runmqsc(args: list[str]) -> int:
    """stdin's MQSC commands to the running queue manager, as runmqsc prints them."""
    from tests.mqemu import runmqsc as client
    name = args[-1]
    record = _record(name)
    if record is None or not _alive(record):
        print(NOT_AVAILABLE)
        return 20
    host, port = _address(record)
    return client.main(["--host", host, "--port", str(port)])


def dltmqm(args: list[str]) -> int:
    """Delete an ended queue manager and what it kept."""
    name = args[-1]
    if _alive(_known(name)):
        raise Refused(f"AMQ8041E: The queue manager '{name}' cannot be deleted: it is running.", 5)
    (STATE / f"{name}.json").unlink()
    (STATE / f"{name}.start.mqsc").unlink(missing_ok=True)
    shutil.rmtree(STATE / f"{name}.data", ignore_errors=True)
    print(f"IBM MQ queue manager '{name}' deleted.")
    return 0


COMMANDS = {"crtmqm": crtmqm, "strmqm": strmqm, "endmqm": endmqm, "dspmq": dspmq,
            "runmqsc": runmqsc, "dltmqm": dltmqm}


def main(argv: list[str]) -> int:
    """Run one control command."""
    STATE.mkdir(parents=True, exist_ok=True)
    try:
        return COMMANDS[argv[0]](argv[1:])
    except Refused as refused:
        print(refused, file=sys.stderr)
        return refused.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
