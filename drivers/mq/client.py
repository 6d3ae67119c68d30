"""Reaching IBM MQ from the MQ driver: loading the client library (IBM's ``ibmmq``, or
``pymqi``), parsing endpoints, and a connection with its open queues.

Endpoints: ``mq://HOST(PORT)[,HOST2(PORT2)]/QMNAME?channel=CHANNEL`` (a client channel of its
own), or ``QMNAME`` / ``*GROUP`` / ``mq:///*GROUP`` looked up in the CCDT; see
:mod:`drivers.mq.driver`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from drivers.mq.settings import MqSettings

GET_WAIT_MS = 500  # an MQGET waits this long for a message, so a stop or move waits at most this
PACING_TICK_S = 0.002  # a paced sender wakes at most this often, putting whatever is due
PAUSED_POLL_S = 0.05  # a paused (or closed-loop) sender looks again this often
COMMIT_EVERY_S = 0.1  # a receiver's syncpoint gets are committed at least this often
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)  # between reconnect attempts, then after errors
FIRST_BUFFER = 4096  # MQGET buffer to start with; doubled when a message does not fit
DEFAULT_CHANNEL = "SYSTEM.DEF.SVRCONN"
DEFAULT_PORT = 1414
INSTALL_HINT = ("pip install 'surge[mq]' (IBM's ibmmq package; pymqi works too) on a machine "
                "with the IBM MQ client (the MQ redistributable client or an MQ installation) "
                "and MQ_INSTALLATION_PATH pointing at it, e.g. /opt/mqm")

CONNECTION_REASONS = (
    "MQRC_CONNECTION_BROKEN", "MQRC_HCONN_ERROR", "MQRC_Q_MGR_NOT_AVAILABLE",
    "MQRC_Q_MGR_QUIESCING", "MQRC_Q_MGR_STOPPING", "MQRC_CONNECTION_QUIESCING",
    "MQRC_CONNECTION_STOPPING", "MQRC_HOST_NOT_AVAILABLE", "MQRC_RECONNECT_QMID_MISMATCH",
    "MQRC_RECONNECT_INCOMPATIBLE", "MQRC_RECONNECT_FAILED", "MQRC_RECONNECT_TIMED_OUT",
    "MQRC_CONNECTION_NOT_AVAILABLE")
RECONNECT_OPTIONS = {"": "MQCNO_RECONNECT_AS_DEF", "no": "MQCNO_RECONNECT_AS_DEF",
                      "yes": "MQCNO_RECONNECT", "qmgr": "MQCNO_RECONNECT_Q_MGR",
                      "disabled": "MQCNO_RECONNECT_DISABLED"}
_ENV_LOCK = threading.Lock()  # pymqi: MQCCDTURL / MQAPPLNAME are process-wide


class MqClientMissing(ImportError):
    """Neither ``ibmmq`` nor ``pymqi`` can be imported (or IBM's client library is missing)."""


def load_mqi() -> ModuleType:
    """IBM's ``ibmmq`` if it imports, else ``pymqi`` (the same API); else :class:`MqClientMissing`
    saying how to install one."""
    problems = []
    for name in ("ibmmq", "pymqi"):
        try:
            return importlib.import_module(name)
        except ImportError as error:
            problems.append(f"{name}: {error}")
    raise MqClientMissing(f"the IBM MQ driver needs an MQI library for Python: {INSTALL_HINT} "
                          f"({'; '.join(problems)})")


@dataclass(frozen=True)
class MqEndpoint:
    """Where a worker connects: a queue manager (name, ``*GROUP`` or "" for any) and, for a
    client channel of its own, the connection name and channel; with no ``conname`` the CCDT
    says how to reach ``qmgr``."""

    qmgr: str
    conname: str = ""
    channel: str = ""

    @classmethod
    def parse(cls, text: str, settings: MqSettings) -> MqEndpoint:
        """Read ``mq://HOST(PORT)/QMNAME?channel=CHL``, ``mq:///QMNAME``, ``QMNAME`` or
        ``*GROUP`` (see the module docstring)."""
        if text.startswith("mq://"):
            parts = urlsplit(text)
            hosts = [h.strip() for h in unquote(parts.netloc).split(",") if h.strip()]
            conname = ",".join(_conname(h) for h in hosts)
            qmgr = unquote(parts.path.lstrip("/")) or settings.queue_manager
            channel = parse_qs(parts.query).get("channel", [""])[0] or settings.channel
            return cls(qmgr, conname, (channel or DEFAULT_CHANNEL) if conname else "")
        if "://" in text:
            raise ValueError(f"not an MQ endpoint: {text!r} (expected mq://HOST(PORT)/QMNAME"
                             "?channel=CHANNEL, QMNAME or *GROUP)")
        return cls(text or settings.queue_manager)


def _conname(host: str) -> str:
    """``host(port)`` from ``host(port)``, ``host:port`` or ``host``."""
    if "(" in host:
        return host
    name, colon, port = host.rpartition(":")
    if colon and name and port.isdigit():
        return f"{name}({port})"
    return f"{host}({DEFAULT_PORT})"


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables around an MQCONNX (the client reads them then)."""
    if not values:
        yield
        return
    with _ENV_LOCK:
        saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def text_of(field: bytes | str) -> str:
    """An MQCHAR field as text (blank or NUL padded)."""
    if isinstance(field, bytes):
        field = field.decode("ascii", "replace")
    return field.rstrip("\0 ")


class Session:
    """One connection to a queue manager and the queues opened on it."""

    def __init__(self, mqi: ModuleType, qm: Any, endpoint: str):
        self.mqi = mqi
        self.qm = qm
        self.endpoint = endpoint
        self.opened: list[Any] = []
        self.outs: list[Any] = []  # sender routes, requester's request queue
        self.sends: list[Any] = []  # their put (a queue's) or pub (a topic's)
        self.inq: Any = None  # receiver's queue, requester's reply queue
        self.reply_name = ""  # requester: ReplyToQ
        self.replies: dict[tuple[str, str], Any] = {}  # responder: open reply queues

    def open(self, name: str, options: int, qmgr: str = "") -> Any:
        """MQOPEN ``name`` (on queue manager ``qmgr``, for replies) with ``options``."""
        desc: Any = name
        if qmgr:
            desc = self.mqi.OD()
            desc.ObjectName = name.encode()
            desc.ObjectQMgrName = qmgr.encode()
        queue = self.mqi.Queue(self.qm, desc, options)
        self.opened.append(queue)
        return queue

    def open_topic(self, topic: str, options: int) -> Any:
        """MQOPEN topic string ``topic`` with ``options``."""
        opened = self.mqi.Topic(self.qm, topic_string=topic, open_opts=options)
        self.opened.append(opened)
        return opened

    def close(self) -> None:
        """Close the queues and disconnect, ignoring errors (the connection may be gone)."""
        for queue in self.opened:
            with contextlib.suppress(Exception):
                queue.close()
        self.opened.clear()
        with contextlib.suppress(Exception):
            self.qm.disconnect()


