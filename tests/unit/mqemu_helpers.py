"""Helpers shared by the tests of surge's MQ code over IBM's real ``ibmmq`` and the MQI emulator
(tests/mqemu; NOT IBM MQ): a driver bound to an emulated queue manager, waiting for counters,
the test's own connection to put, get and look, queue depths and connections as the queue
manager shows them (``DISPLAY QLOCAL``, ``DISPLAY CONN``), and JSON CCDT files."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from drivers.message import PayloadBuilder
from drivers.mq.driver import MqDriver
from drivers.mq.settings import MqSettings
from drivers.protocol import Destination
from drivers.workers import Recorder, SenderRole

USER, PASSWORD = "perf", "perf-secret"
SETTINGS = MqSettings(user=USER, password=PASSWORD, channel="PERF.APP.CHL")
MQ_FIELDS = {name for name in MqSettings.__dataclass_fields__}


def endpoint(qmgr: Any) -> str:
    """The driver's endpoint for an emulated queue manager: its own client channel."""
    return f"mq://{qmgr.conname}/{qmgr.name}"


def make(ibmmq: ModuleType, qmgr: Any, endpoints: tuple[str, ...] = (),
         settings: MqSettings = SETTINGS, **fields: Any) -> MqDriver:
    """A started driver whose destination is ``fields`` (queue default ``perf``) at ``qmgr``
    (or ``endpoints``); ``MqSettings`` fields among ``fields`` replace those of ``settings``."""
    mq = {name: fields.pop(name) for name in list(fields) if name in MQ_FIELDS}
    if mq:
        settings = MqSettings(**{**settings.__dict__, **mq})
    driver = MqDriver(Destination(endpoints=endpoints or (endpoint(qmgr),),
                                  queue=fields.pop("queue", "perf"), **fields),
                      Recorder(), settings, mqi=ibmmq, get_wait_ms=50)
    driver.start()
    return driver


def sender(driver: MqDriver, rate: float, limit: int | None = None, producer_id: int = 1,
           size: int | Any = 100) -> SenderRole:
    """A sender role of ``driver`` (made under its lock)."""
    return driver.call(lambda: SenderRole(producer_id, rate, PayloadBuilder(size),
                                          driver.recorder, limit=limit))


def until(condition: Any, timeout_s: float = 20.0) -> None:
    """Wait for ``condition()``; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def counted(driver: MqDriver, name: str) -> int:
    """The driver's recorder's counter ``name``, read under the driver's lock."""
    return driver.call(lambda: getattr(driver.recorder, name))


def mq_threads() -> list[str]:
    """The driver's worker threads still alive."""
    return [t.name for t in threading.enumerate() if t.name.startswith("mq-") and t.is_alive()]


@pytest.fixture(autouse=True)
def no_mq_threads_left() -> Iterator[None]:
    """Autouse where imported: every worker thread has ended when the test ends."""
    yield
    until(lambda: not mq_threads(), timeout_s=5)


def depth(qmgr: Any, queue: str) -> int:
    """CURDEPTH of ``queue`` as ``DISPLAY QLOCAL`` shows it."""
    line = qmgr.admin(f"DISPLAY QLOCAL('{queue}')")[0][0]
    return int(line.split("CURDEPTH(")[1].split(")")[0])


def connections(qmgr: Any) -> list[dict[str, str]]:
    """``DISPLAY CONN(*)``: one dict of attributes (APPLTAG, USERID, CONNAME, UOW) per
    connection."""
    return [dict(re.findall(r"(\w+)\(((?:[^()]|\([^()]*\))*)\)", line))
            for line in qmgr.admin("DISPLAY CONN(*)")[0]]


@contextlib.contextmanager
def connected(ibmmq: ModuleType, qmgr: Any, user: str = USER,
              password: str = PASSWORD) -> Iterator[Any]:
    """The test's own client connection to ``qmgr`` (disconnected on leaving); an MQCSP with
    ``user`` and ``password`` unless ``user`` is empty."""
    C = ibmmq.CMQC
    credentials = {"csp": ibmmq.CSP(CSPUserId=user, CSPPassword=password,
                                    AuthenticationType=C.MQCSP_AUTH_USER_ID_AND_PWD)} \
        if user else {}
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options(qmgr.name, cd=ibmmq.CD(ChannelName=b"TEST.CHL",
                                                   ConnectionName=qmgr.conname.encode()),
                            **credentials)
    try:
        yield qm
    finally:
        qm.disconnect()


def put_messages(ibmmq: ModuleType, qmgr: Any, queue: str,
                 messages: list[tuple[bytes, Any]]) -> None:
    """Put (body, MQMD) pairs on ``queue`` with the test's own connection (ids as given)."""
    with connected(ibmmq, qmgr) as qm:
        out = ibmmq.Queue(qm, queue, ibmmq.CMQC.MQOO_OUTPUT)
        for body, md in messages:
            out.put(body, md)
        out.close()


def seed(ibmmq: ModuleType, qmgr: Any, queue: str, n: int, size: int = 100,
         producer: int = 9) -> None:
    """Put ``n`` surge messages of ``producer`` (sequence 0..n-1) on ``queue``."""
    builder = PayloadBuilder(size)
    put_messages(ibmmq, qmgr, queue, [(builder.build(producer, seq, time.time_ns()), ibmmq.MD())
                                      for seq in range(n)])


def drain_with_md(ibmmq: ModuleType, qmgr: Any, queue: str, user: str = USER,
                  password: str = PASSWORD) -> list[tuple[bytes, Any]]:
    """Get every message on ``queue`` with the test's own connection: (body, MQMD) pairs."""
    C = ibmmq.CMQC
    got = []
    with connected(ibmmq, qmgr, user, password) as qm:
        handle = ibmmq.Queue(qm, queue, C.MQOO_INPUT_SHARED)
        try:
            while True:
                md = ibmmq.MD()
                got.append((handle.get(None, md, ibmmq.GMO(Options=C.MQGMO_NO_WAIT)), md))
        except ibmmq.MQMIError as error:
            assert error.reason == C.MQRC_NO_MSG_AVAILABLE
        handle.close()
    return got


def drain(ibmmq: ModuleType, qmgr: Any, queue: str) -> list[bytes]:
    """The bodies of every message on ``queue``, got with the test's own connection."""
    return [body for body, _ in drain_with_md(ibmmq, qmgr, queue)]


def write_ccdt(path: Path, entries: list[tuple[str, str, Any, int]]) -> str:
    """A JSON CCDT of (channel, group, qmgr, weight) entries; its file:// URL."""
    path.write_text(json.dumps({"channel": [{
        "name": channel, "type": "clientConnection",
        "clientConnection": {"connection": [{"host": "127.0.0.1", "port": qmgr.port}],
                             "queueManager": group},
        "connectionManagement": {"clientWeight": weight, "affinity": "none"},
    } for channel, group, qmgr, weight in entries]}), encoding="utf-8")
    return f"file://{path}"
