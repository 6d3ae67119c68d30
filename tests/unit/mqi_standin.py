"""A STAND-IN for the MQI library (``pymqi`` / IBM's ``ibmmq``) in unit tests. It is NOT IBM MQ.

IBM's client library cannot be installed here, so ``drivers/mq.py`` is tested against this:
the same Python API (``QueueManager``, ``Queue``, ``MD``/``GMO``/``PMO``/``OD``/``CD``/``SCO``,
``CNO``/``CBD`` in the ``ibmmq`` flavour, ``CMQC``/``CMQXC`` with the real constant values,
``MQMIError`` with ``comp``/``reason``), backed by in-memory queues, recording every MQI call
in :attr:`StandIn.calls` so tests can assert call sequences and options.

It imitates only behaviour documented for MQ, and only what the driver uses:

- MQCONNX: a client finds its channel in an MQCD, else a CCDT (``MQCNO.CCDTUrl`` - honoured
  from CNO Version 6 - or the ``MQCCDTURL`` environment variable at connect time), else fails
  with MQRC_Q_MGR_NAME_ERROR. The CCDT file is recorded, not read. ``*GROUP`` or "" connect
  to any running queue manager (the stand-in does not model group membership), a name to
  that one. The application name comes from ``MQCNO.ApplName`` (CNO Version 7), else the
  ``MQAPPLNAME`` environment variable, and shows in ``PutApplName``. A thread with a
  connection that is not shared (no MQCNO_HANDLE_SHARE_*) gets MQRC_ALREADY_CONNECTED.
- MQOPEN of defined local queues only (else MQRC_UNKNOWN_OBJECT_NAME); MQPUT/MQGET check
  the open options; MQOO_INQUIRE is accepted (MQINQ itself is not imitated), and so are
  MQOO_BIND_ON_OPEN and MQOO_BIND_NOT_FIXED (no cluster queues: MQ ignores them too).
- Connection authentication as CHCKCLNT(REQUIRED) does it, once a test calls
  :meth:`StandIn.require_user`: an MQCONNX without that user and password fails with
  MQRC_NOT_AUTHORIZED. A queue named with another stand-in queue manager's name is delivered to
  that queue manager, as running cluster channels would.
- MQPUT: a new MsgId with MQPMO_NEW_MSG_ID or a null MsgId; ReplyToQMgr is set to the queue
  manager's name when ReplyToQ is given without one; syncpoint puts appear at MQCMIT.
- MQGET: first in, first out; selection on MsgId/CorrelId (GMO Version 1: the MD's non-null
  ids; Version 2 and later: MatchOptions); MQGMO_WAIT waits WaitInterval ms, then
  MQRC_NO_MSG_AVAILABLE; a message longer than the buffer fails with
  MQRC_TRUNCATED_MSG_FAILED and stays; syncpoint gets are held until MQCMIT and come back
  where they were, BackoutCount + 1, after MQBACK or a broken connection.
- Publish/subscribe: MQOPEN of a topic string (``Topic``) for output; an MQPUT to it puts one
  copy on the queue of each subscription of that queue manager whose topic string matches
  (topic-based wildcards: ``+`` one level, ``#`` zero or more). Subscriptions are defined by
  the test (DEFINE SUB: :meth:`StandIn.subscribe`) or made with MQSUB (durable only, with
  MQSO_CREATE/MQSO_RESUME and a queue opened for output; MQCO_REMOVE_SUB deletes one).
- MQDISC commits a unit of work (MQ on Multiplatforms does).
- :meth:`StandIn.stop_qmgr` breaks its connections: the next call fails with
  MQRC_CONNECTION_BROKEN; a reconnectable one (MQCNO_RECONNECT*) is reconnected to a running
  queue manager it may use (any for ``*GROUP`` with MQCNO_RECONNECT, else the same name; none:
  MQRC_RECONNECT_FAILED), its open queues with it, its MQCB event handler sees
  MQRC_RECONNECTING then MQRC_RECONNECTED, and a unit of work it had is backed out, so the next
  MQCMIT fails with MQRC_BACKED_OUT.

Not imitated (options for them raise NotImplementedError): browsing, truncated-message
acceptance, data conversion, message groups, expiry, priorities, persistence to disk, security
beyond the user check above, channels, clustering beyond the delivery above.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
import time
from typing import Any, NamedTuple


class CMQC:
    """The constants the driver and the stand-in use, with the values of IBM's cmqc.h."""

    MQCC_OK, MQCC_WARNING, MQCC_FAILED = 0, 1, 2
    MQRC_NONE = 0
    MQRC_ALREADY_CONNECTED = 2002
    MQRC_BACKED_OUT = 2003
    MQRC_CONNECTION_BROKEN = 2009
    MQRC_HCONN_ERROR = 2018
    MQRC_NO_MSG_AVAILABLE = 2033
    MQRC_NOT_AUTHORIZED = 2035
    MQRC_NOT_OPEN_FOR_INPUT = 2037
    MQRC_NOT_OPEN_FOR_OUTPUT = 2039
    MQRC_Q_FULL = 2053
    MQRC_Q_MGR_NAME_ERROR = 2058
    MQRC_Q_MGR_NOT_AVAILABLE = 2059
    MQRC_TRUNCATED_MSG_FAILED = 2080
    MQRC_UNKNOWN_OBJECT_NAME = 2085
    MQRC_HOBJ_ERROR = 2019
    MQRC_Q_MGR_QUIESCING = 2161
    MQRC_Q_MGR_STOPPING = 2162
    MQRC_CONNECTION_QUIESCING = 2202
    MQRC_CONNECTION_STOPPING = 2203
    MQRC_HOST_NOT_AVAILABLE = 2538
    MQRC_RECONNECTING = 2544
    MQRC_RECONNECTED = 2545
    MQRC_RECONNECT_QMID_MISMATCH = 2546
    MQRC_RECONNECT_INCOMPATIBLE = 2547
    MQRC_RECONNECT_FAILED = 2548
    MQRC_CALL_INTERRUPTED = 2549
    MQRC_RECONNECT_TIMED_OUT = 2556
    MQRC_CONNECTION_NOT_AVAILABLE = 2568

    MQCNO_VERSION_5, MQCNO_VERSION_6, MQCNO_VERSION_7 = 5, 6, 7
    MQCNO_NONE = 0x00000000
    MQCNO_STANDARD_BINDING = 0x00000000
    MQCNO_HANDLE_SHARE_NONE = 0x00000020
    MQCNO_HANDLE_SHARE_BLOCK = 0x00000040
    MQCNO_HANDLE_SHARE_NO_BLOCK = 0x00000080
    MQCNO_CLIENT_BINDING = 0x00000800
    MQCNO_RECONNECT_AS_DEF = 0x00000000
    MQCNO_RECONNECT = 0x01000000
    MQCNO_RECONNECT_DISABLED = 0x02000000
    MQCNO_RECONNECT_Q_MGR = 0x04000000

    MQOO_INPUT_AS_Q_DEF = 0x00000001
    MQOO_INPUT_SHARED = 0x00000002
    MQOO_INPUT_EXCLUSIVE = 0x00000004
    MQOO_OUTPUT = 0x00000010
    MQOO_INQUIRE = 0x00000020
    MQOO_FAIL_IF_QUIESCING = 0x00002000
    MQOO_BIND_ON_OPEN = 0x00004000
    MQOO_BIND_NOT_FIXED = 0x00008000
    MQCO_NONE = 0x00000000

    MQPMO_VERSION_1 = 1
    MQPMO_NONE = 0x00000000
    MQPMO_SYNCPOINT = 0x00000002
    MQPMO_NO_SYNCPOINT = 0x00000004
    MQPMO_NEW_MSG_ID = 0x00000040
    MQPMO_NEW_CORREL_ID = 0x00000080
    MQPMO_FAIL_IF_QUIESCING = 0x00002000

    MQGMO_VERSION_1, MQGMO_VERSION_2 = 1, 2
    MQGMO_NONE = MQGMO_NO_WAIT = 0x00000000
    MQGMO_WAIT = 0x00000001
    MQGMO_SYNCPOINT = 0x00000002
    MQGMO_NO_SYNCPOINT = 0x00000004
    MQGMO_ACCEPT_TRUNCATED_MSG = 0x00000040
    MQGMO_FAIL_IF_QUIESCING = 0x00002000
    MQGMO_CONVERT = 0x00004000
    MQWI_UNLIMITED = -1
    MQMO_NONE = 0x00000000
    MQMO_MATCH_MSG_ID = 0x00000001
    MQMO_MATCH_CORREL_ID = 0x00000002

    MQMD_VERSION_1 = 1
    MQMI_NONE = b"\0" * 24
    MQCI_NONE = b"\0" * 24
    MQPER_NOT_PERSISTENT, MQPER_PERSISTENT, MQPER_PERSISTENCE_AS_Q_DEF = 0, 1, 2
    MQMT_REQUEST, MQMT_REPLY, MQMT_DATAGRAM = 1, 2, 8
    MQRO_NONE = 0x00000000
    MQRO_COPY_MSG_ID_TO_CORREL_ID = 0x00000000
    MQRO_PASS_CORREL_ID = 0x00000040
    MQEI_UNLIMITED = -1
    MQFMT_NONE = b"        "
    MQENC_NATIVE = 0x00000222
    MQPRI_PRIORITY_AS_Q_DEF = -1

    MQCSP_AUTH_NONE = 0
    MQCSP_AUTH_USER_ID_AND_PWD = 1
    MQCSP_VERSION_1 = 1
    MQSCO_VERSION_5, MQSCO_VERSION_6 = 5, 6

    MQOT_TOPIC = 8
    MQOD_VERSION_4 = 4
    MQSO_NON_DURABLE = 0x00000000
    MQSO_ALTER = 0x00000001
    MQSO_CREATE = 0x00000002
    MQSO_RESUME = 0x00000004
    MQSO_DURABLE = 0x00000008
    MQSO_MANAGED = 0x00000020
    MQSO_FAIL_IF_QUIESCING = 0x00002000
    MQCO_KEEP_SUB = 0x00000004
    MQCO_REMOVE_SUB = 0x00000008
    MQRC_NO_SUBSCRIPTION = 2428
    MQRC_SUB_ALREADY_EXISTS = 2432

    MQOP_REGISTER = 0x00000100
    MQOP_DEREGISTER = 0x00000200
    MQCBT_MESSAGE_CONSUMER = 0x00000001
    MQCBT_EVENT_HANDLER = 0x00000002
    MQCBCT_EVENT_CALL = 5
    MQHO_NONE = 0


class CMQXC:
    """Channel constants (cmqxc.h)."""

    MQCHT_CLNTCONN = 6
    MQXPT_TCP = 2


_REASONS = {v: k for k, v in vars(CMQC).items() if k.startswith("MQRC_")}


class Error(Exception):
    """Base of the library's errors."""


class MQMIError(Error):
    """An MQI call's completion and reason code, as pymqi raises them."""

    def __init__(self, comp: int, reason: int, **kw: Any):
        super().__init__(comp, reason)
        self.comp, self.reason = comp, reason
        for key, value in kw.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return (f"MQI Error. Comp: {self.comp}, Reason {self.reason}: "
                f"{_REASONS.get(self.reason, 'UNKNOWN')}")


class PYIFError(Error):
    """An error of the library itself (not an MQI reason)."""


def _fail(reason: int) -> MQMIError:
    return MQMIError(CMQC.MQCC_FAILED, reason)


# -- structures ---------------------------------------------------------------------------------

_LENGTHS = {"MsgId": 24, "CorrelId": 24, "ReplyToQ": 48, "ReplyToQMgr": 48, "Format": 8,
            "PutApplName": 28, "ObjectName": 48, "ObjectQMgrName": 48, "ChannelName": 20,
            "ConnectionName": 264, "SSLCipherSpec": 32, "KeyRepository": 256, "ApplName": 28,
            "CertificateLabel": 64}
_BINARY = {"MsgId", "CorrelId"}


class _Struct:
    """An MQI structure: attributes with MQI defaults; unknown names are refused, as by the
    libraries. ``_packed`` checks field types the way the library's ``pack()`` would."""

    _defaults: dict[str, Any] = {}
    _strict_bytes = True  # pymqi: CHAR fields must be bytes; ibmmq encodes str itself

    def __init__(self, **kw: Any):
        for name, value in self._defaults.items():
            object.__setattr__(self, name, value)
        for name, value in kw.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._defaults:
            raise AttributeError(f"{type(self).__name__} has no field {name}")
        object.__setattr__(self, name, value)

    def set_vs(self, name: str, value: bytes | str, *_: Any) -> None:
        """An MQCHARV field (ObjectString, SubName), as the libraries set it."""
        setattr(self, name, value.encode() if isinstance(value, str) else value)

    def _field(self, name: str) -> Any:
        """The field as the C structure would hold it (fixed-length CHAR and BYTE fields)."""
        value = getattr(self, name)
        if isinstance(value, str):
            if self._strict_bytes or name in _BINARY:
                raise TypeError(f"{type(self).__name__}.{name} must be bytes, got str")
            value = value.encode("ascii")
        if isinstance(value, bytes) and name in _LENGTHS:
            value = value[:_LENGTHS[name]].ljust(_LENGTHS[name], b"\0")
        return value


def _text(value: bytes) -> str:
    return value.rstrip(b"\0 ").decode("ascii")


def _structures(strict: bool) -> dict[str, type]:
    def struct(name: str, defaults: dict[str, Any]) -> type:
        return type(name, (_Struct,), {"_defaults": defaults, "_strict_bytes": strict})

    return {
        "MD": struct("MD", {
            "Version": CMQC.MQMD_VERSION_1, "Report": CMQC.MQRO_NONE,
            "MsgType": CMQC.MQMT_DATAGRAM, "Expiry": CMQC.MQEI_UNLIMITED, "Feedback": 0,
            "Encoding": CMQC.MQENC_NATIVE, "CodedCharSetId": 0, "Format": b"",
            "Priority": CMQC.MQPRI_PRIORITY_AS_Q_DEF,
            "Persistence": CMQC.MQPER_PERSISTENCE_AS_Q_DEF, "MsgId": b"", "CorrelId": b"",
            "BackoutCount": 0, "ReplyToQ": b"", "ReplyToQMgr": b"", "PutApplName": b""}),
        "GMO": struct("GMO", {
            "Version": CMQC.MQGMO_VERSION_1, "Options": CMQC.MQGMO_NO_WAIT, "WaitInterval": 0,
            "MatchOptions": CMQC.MQMO_MATCH_MSG_ID | CMQC.MQMO_MATCH_CORREL_ID,
            "ResolvedQName": b""}),
        "PMO": struct("PMO", {"Version": CMQC.MQPMO_VERSION_1, "Options": CMQC.MQPMO_NONE,
                              "ResolvedQName": b""}),
        "OD": struct("OD", {"ObjectName": b"", "ObjectQMgrName": b""}),
        "CD": struct("CD", {"ChannelName": b"", "ConnectionName": b"", "ChannelType": 1,
                            "TransportType": 1, "SSLCipherSpec": b"", "Version": 11}),
        "SCO": struct("SCO", {"KeyRepository": b"", "CertificateLabel": b"",
                              "KeyRepoPassword": None, "Version": CMQC.MQSCO_VERSION_5}),
        "CSP": struct("CSP", {"Version": CMQC.MQCSP_VERSION_1,
                              "AuthenticationType": CMQC.MQCSP_AUTH_NONE, "CSPUserId": None,
                              "CSPPassword": None}),
        "CNO": struct("CNO", {"Version": CMQC.MQCNO_VERSION_5, "Options": CMQC.MQCNO_NONE,
                              "CCDTUrl": 0, "ApplName": b""}),
        "CBD": struct("CBD", {"CallbackType": CMQC.MQCBT_MESSAGE_CONSUMER, "Options": 0,
                              "CallbackFunction": None, "CallbackArea": None}),
        "SD": struct("SD", {"Version": 1, "Options": 0, "ObjectName": b"",
                            "ObjectString": b"", "SubName": b""}),
        "CBC": struct("CBC", {"CallType": CMQC.MQCBCT_EVENT_CALL, "CompCode": 0,
                              "Reason": 0}),
    }


# -- the in-memory queue managers ------------------------------------------------------------


class Call(NamedTuple):
    """One recorded MQI call."""

    name: str  # MQCONNX, MQCB, MQOPEN, MQPUT, MQGET, MQCMIT, MQBACK, MQCLOSE, MQDISC
    hconn: int
    thread: str
    at: float  # time.monotonic() of the call
    details: dict[str, Any]


class _Message:
    __slots__ = ("order", "body", "md")

    def __init__(self, order: int, body: bytes, md: dict[str, Any]):
        self.order, self.body, self.md = order, body, md


class _LocalQueue:
    def __init__(self, name: str, max_depth: int):
        self.name, self.max_depth = name, max_depth
        self.messages: list[_Message] = []

    def restore(self, message: _Message) -> None:
        """Back where it was taken from (backout)."""
        bisect.insort(self.messages, message, key=lambda m: m.order)


class _QMgr:
    def __init__(self, name: str):
        self.name, self.running = name, True
        self.queues: dict[str, _LocalQueue] = {}
        self.subscriptions: dict[str, tuple[str, str]] = {}  # name -> (topic string, queue)


def topic_matches(pattern: str, topic: str) -> bool:
    """MQ's topic-based wildcards (WSCHEMA(TOPIC)): ``+`` is one level, ``#`` zero or more,
    each only as a whole level; levels are separated by ``/``."""
    def match(p: list[str], t: list[str]) -> bool:
        if not p:
            return not t
        if p[0] == "#":
            return any(match(p[1:], t[i:]) for i in range(len(t) + 1))
        return bool(t) and p[0] in ("+", t[0]) and match(p[1:], t[1:])
    return match(pattern.split("/"), topic.split("/"))


class _Connection:
    def __init__(self, hconn: int, qmgr: _QMgr, requested: str, options: int, appl: str):
        self.hconn, self.qmgr, self.requested = hconn, qmgr, requested
        self.options, self.appl_name = options, appl
        self.broken = 0  # reason every call fails with
        self.gets: list[tuple[_LocalQueue, _Message]] = []  # the unit of work
        self.puts: list[tuple[_LocalQueue, _Message]] = []
        self.backed_out = False  # a unit of work lost in a reconnect: MQCMIT says so
        self.handler: Any = None
        self.qm_object: Any = None

    @property
    def reconnectable(self) -> bool:
        return bool(self.options & (CMQC.MQCNO_RECONNECT | CMQC.MQCNO_RECONNECT_Q_MGR))

    def backout(self) -> bool:
        had = bool(self.gets or self.puts)
        for queue, message in self.gets:
            message.md["BackoutCount"] += 1
            queue.restore(message)
        self.gets.clear()
        self.puts.clear()
        return had


class StandIn:
    """A stand-in MQI module bound to fresh in-memory queue managers. ``flavour`` "pymqi" has
    no CNO/CBD/MQCB (options go in ``opts``, the CCDT and application name through the
    environment); "ibmmq" has them."""

    def __init__(self, flavour: str = "pymqi", qmgrs: tuple[str, ...] = ("QM1",),
                 queues: tuple[str, ...] = ("perf",)):
        if flavour not in ("pymqi", "ibmmq"):
            raise ValueError(flavour)
        self.flavour = flavour
        self.calls: list[Call] = []
        self.cond = threading.Condition()
        self.qmgrs = {name: _QMgr(name) for name in qmgrs}
        self.connections: dict[int, _Connection] = {}
        self._hconns = itertools.count(1)
        self._orders = itertools.count()
        self._ids = itertools.count(1)
        self._unshared: dict[int, int] = {}  # thread id -> hconn of an unshared connection
        self.user: tuple[str, str] | None = None  # require_user: the one user MQCONNX accepts
        for queue in queues:
            self.define(queue)
        self.CMQC, self.CMQXC = CMQC, CMQXC
        self.Error, self.MQMIError, self.PYIFError = Error, MQMIError, PYIFError
        structures = _structures(strict=flavour == "pymqi")
        for name in ("MD", "GMO", "PMO", "OD", "CD", "SCO", "SD"):
            setattr(self, name, structures[name])
        if flavour == "ibmmq":  # pymqi's CSP has only C pointer fields: user= / password=
            self.CNO, self.CBD, self.CSP = structures["CNO"], structures["CBD"], structures["CSP"]
        self._cbc = structures["CBC"]
        standin = self
        base = _IbmmqQueueManager if flavour == "ibmmq" else _QueueManager
        self.QueueManager = type("QueueManager", (base,), {"_standin": standin})
        self.Queue = type("Queue", (_Queue,), {"_standin": standin})
        self.Topic = type("Topic", (_Topic,), {"_standin": standin})
        self.Subscription = type("Subscription", (_Subscription,), {"_standin": standin})

    # -- set-up and inspection for tests -----------------------------------------------------

    def define(self, queue: str, qmgr: str | None = None, max_depth: int = 5000) -> None:
        """DEFINE QLOCAL on ``qmgr`` (default: every queue manager, as the -ic file does)."""
        for manager in [self.qmgrs[qmgr]] if qmgr else self.qmgrs.values():
            manager.queues[queue] = _LocalQueue(queue, max_depth)

    def subscribe(self, name: str, topic: str, queue: str, qmgr: str | None = None) -> None:
        """DEFINE SUB(name) TOPICSTR(topic) DEST(queue) on ``qmgr`` (default: every one)."""
        for manager in [self.qmgrs[qmgr]] if qmgr else self.qmgrs.values():
            manager.subscriptions[name] = (topic, queue)

    def require_user(self, user: str, password: str) -> None:
        """Authenticate clients (CHCKCLNT(REQUIRED)): only this user with this password may
        connect; any other MQCONNX fails with MQRC_NOT_AUTHORIZED."""
        self.user = (user, password)

    def messages(self, queue: str, qmgr: str | None = None) -> list[tuple[bytes, dict]]:
        """Bodies and descriptors on ``queue`` (committed ones), oldest first."""
        manager = self.qmgrs[qmgr] if qmgr else next(iter(self.qmgrs.values()))
        with self.cond:
            return [(m.body, dict(m.md)) for m in manager.queues[queue].messages]

    def named(self, *names: str) -> list[Call]:
        """The recorded calls with these names, in order."""
        with self.cond:
            return [c for c in self.calls if c.name in names]

    def stop_qmgr(self, name: str) -> None:
        """endmqm: break the queue manager's connections (see the module docstring)."""
        events = []
        with self.cond:
            self.qmgrs[name].running = False
            for conn in self.connections.values():
                if conn.qmgr.name != name or conn.broken:
                    continue
                had = conn.backout()
                target = self._reconnect_target(conn) if conn.reconnectable else None
                if target is None:
                    conn.broken = (CMQC.MQRC_RECONNECT_FAILED if conn.reconnectable
                                   else CMQC.MQRC_CONNECTION_BROKEN)
                    continue
                conn.qmgr = target
                conn.backed_out = conn.backed_out or had
                if conn.handler is not None:
                    events.append(conn)
            self.cond.notify_all()
        for conn in events:  # on another thread than the application's, as MQ does
            for reason in (CMQC.MQRC_RECONNECTING, CMQC.MQRC_RECONNECTED):
                conn.handler(queue_manager=conn.qm_object, queue=None, md=None, gmo=None,
                             msg=b"", cbc=self._cbc(Reason=reason, CompCode=CMQC.MQCC_WARNING))

    def start_qmgr(self, name: str) -> None:
        """strmqm."""
        with self.cond:
            self.qmgrs[name].running = True

    # -- internals -------------------------------------------------------------------------

    def _record(self, name: str, hconn: int, **details: Any) -> None:
        self.calls.append(Call(name, hconn, threading.current_thread().name, time.monotonic(),
                               details))

    def _reconnect_target(self, conn: _Connection) -> _QMgr | None:
        for manager in self.qmgrs.values():
            if not manager.running:
                continue
            if manager.name == conn.requested or (
                    conn.options & CMQC.MQCNO_RECONNECT and conn.requested[:1] in ("*", "")):
                return manager
        return None

    def _resolve(self, requested: str) -> _QMgr:
        if requested[:1] in ("*", ""):
            for manager in self.qmgrs.values():
                if manager.running:
                    return manager
            raise _fail(CMQC.MQRC_Q_MGR_NOT_AVAILABLE)
        manager = self.qmgrs.get(requested)
        if manager is None:
            raise _fail(CMQC.MQRC_Q_MGR_NAME_ERROR)
        if not manager.running:
            raise _fail(CMQC.MQRC_Q_MGR_NOT_AVAILABLE)
        return manager

    def _live(self, hconn: int) -> _Connection:
        conn = self.connections.get(hconn)
        if conn is None:
            raise _fail(CMQC.MQRC_HCONN_ERROR)
        if conn.broken:
            raise _fail(conn.broken)
        return conn


def _check_options(what: str, options: int, supported: int) -> None:
    unknown = options & ~supported
    if unknown:
        raise NotImplementedError(f"stand-in: {what} options {unknown:#x} are not imitated")


_CNO_SUPPORTED = (CMQC.MQCNO_CLIENT_BINDING | CMQC.MQCNO_HANDLE_SHARE_NONE
                  | CMQC.MQCNO_HANDLE_SHARE_BLOCK | CMQC.MQCNO_HANDLE_SHARE_NO_BLOCK
                  | CMQC.MQCNO_RECONNECT | CMQC.MQCNO_RECONNECT_DISABLED
                  | CMQC.MQCNO_RECONNECT_Q_MGR)
_OO_SUPPORTED = (CMQC.MQOO_INPUT_AS_Q_DEF | CMQC.MQOO_INPUT_SHARED | CMQC.MQOO_INPUT_EXCLUSIVE
                 | CMQC.MQOO_OUTPUT | CMQC.MQOO_INQUIRE | CMQC.MQOO_FAIL_IF_QUIESCING
                 | CMQC.MQOO_BIND_ON_OPEN | CMQC.MQOO_BIND_NOT_FIXED)  # no clusters: no effect
_PMO_SUPPORTED = (CMQC.MQPMO_SYNCPOINT | CMQC.MQPMO_NO_SYNCPOINT | CMQC.MQPMO_NEW_MSG_ID
                  | CMQC.MQPMO_NEW_CORREL_ID | CMQC.MQPMO_FAIL_IF_QUIESCING)
_GMO_SUPPORTED = (CMQC.MQGMO_WAIT | CMQC.MQGMO_SYNCPOINT | CMQC.MQGMO_NO_SYNCPOINT
                  | CMQC.MQGMO_FAIL_IF_QUIESCING)
_INPUT = CMQC.MQOO_INPUT_AS_Q_DEF | CMQC.MQOO_INPUT_SHARED | CMQC.MQOO_INPUT_EXCLUSIVE


class _QueueManager:
    """``QueueManager(None)`` then ``connect_with_options``; commit, backout, disconnect."""

    _standin: StandIn

    def __init__(self, name: Any = None, disconnect_on_exit: bool = True, **_: Any):
        self.hconn = 0
        if name is not None:
            self.connect_with_options(name)

    def connect_with_options(self, name: str | bytes, *args: Any, **kwargs: Any) -> None:
        """MQCONNX."""
        standin = self._standin
        if args:
            kwargs["cd"] = args[0]
            if len(args) > 1:
                kwargs["sco"] = args[1]
        cno = kwargs.get("cno") if standin.flavour == "ibmmq" else None  # pymqi ignores it
        options = cno.Options if cno is not None else kwargs.get("opts", CMQC.MQCNO_NONE)
        if standin.flavour == "ibmmq" and not options & (CMQC.MQCNO_HANDLE_SHARE_BLOCK
                                                        | CMQC.MQCNO_HANDLE_SHARE_NO_BLOCK):
            options |= CMQC.MQCNO_HANDLE_SHARE_BLOCK  # ibmmq adds it by itself
        _check_options("MQCNO", options, _CNO_SUPPORTED)
        cd, sco = kwargs.get("cd"), kwargs.get("sco")
        user, password, auth = _credentials(standin, kwargs)
        if sco is not None and sco.KeyRepoPassword is not None and standin.flavour == "pymqi":
            raise AttributeError("stand-in: pymqi's SCO has no KeyRepoPassword")
        requested = name.decode() if isinstance(name, bytes) else name
        ccdt = appl = ""
        if cno is not None and cno.Version >= CMQC.MQCNO_VERSION_6 and cno.CCDTUrl:
            ccdt = cno.CCDTUrl.decode() if isinstance(cno.CCDTUrl, bytes) else cno.CCDTUrl
        if cno is not None and cno.Version >= CMQC.MQCNO_VERSION_7:
            appl = _text(cno._field("ApplName"))
        ccdt = ccdt or os.environ.get("MQCCDTURL", "")
        appl = appl or os.environ.get("MQAPPLNAME", "")
        details = {
            "qmgr": requested, "options": options, "ccdt_url": "" if cd else ccdt,
            "appl_name": appl, "cno_version": cno.Version if cno is not None else None,
            "channel": _text(cd._field("ChannelName")) if cd else "",
            "conname": _text(cd._field("ConnectionName")) if cd else "",
            "channel_type": cd.ChannelType if cd else None,
            "transport": cd.TransportType if cd else None,
            "cipher": _text(cd._field("SSLCipherSpec")) if cd else "",
            "key_repository": _text(sco._field("KeyRepository")) if sco else "",
            "certificate_label": _text(sco._field("CertificateLabel")) if sco else "",
            "key_repository_password": (sco.KeyRepoPassword if sco else None)
            or os.environ.get("MQKEYRPWD"),
            "user": user, "password": password, "authentication": auth,
            "password_given": password is not None}
        thread = threading.get_ident()
        shared = options & (CMQC.MQCNO_HANDLE_SHARE_BLOCK | CMQC.MQCNO_HANDLE_SHARE_NO_BLOCK)
        with standin.cond:
            try:
                if not shared and thread in standin._unshared:
                    raise MQMIError(CMQC.MQCC_WARNING, CMQC.MQRC_ALREADY_CONNECTED)
                if not cd and not ccdt:
                    raise _fail(CMQC.MQRC_Q_MGR_NAME_ERROR)  # no channel definition at all
                if standin.user is not None and (user, password) != standin.user:
                    raise _fail(CMQC.MQRC_NOT_AUTHORIZED)
                manager = standin._resolve(requested)
            except MQMIError as error:
                standin._record("MQCONNX", 0, reason=error.reason, **details)
                raise
            self.hconn = next(standin._hconns)
            conn = _Connection(self.hconn, manager, requested, options, appl)
            conn.qm_object = self
            standin.connections[self.hconn] = conn
            if not shared:
                standin._unshared[thread] = self.hconn
            standin._record("MQCONNX", self.hconn, reason=0, resolved=manager.name, **details)

    def commit(self) -> None:
        """MQCMIT."""
        standin = self._standin
        with standin.cond:
            standin._record("MQCMIT", self.hconn)
            conn = standin._live(self.hconn)
            if conn.backed_out:
                conn.backed_out = False
                raise _fail(CMQC.MQRC_BACKED_OUT)
            _commit(conn)
            standin.cond.notify_all()

    def backout(self) -> None:
        """MQBACK."""
        standin = self._standin
        with standin.cond:
            standin._record("MQBACK", self.hconn)
            conn = standin._live(self.hconn)
            conn.backed_out = False
            conn.backout()
            standin.cond.notify_all()

    def disconnect(self) -> None:
        """MQDISC: commits a unit of work in progress."""
        standin = self._standin
        with standin.cond:
            standin._record("MQDISC", self.hconn)
            conn = standin.connections.pop(self.hconn, None)
            for thread, hconn in list(standin._unshared.items()):
                if hconn == self.hconn:
                    del standin._unshared[thread]
            if conn is None:
                raise PYIFError("not connected")
            if conn.broken:
                raise _fail(conn.broken)
            _commit(conn)
            standin.cond.notify_all()


class _IbmmqQueueManager(_QueueManager):
    """ibmmq's QueueManager also has ``cb`` (MQCB)."""

    def cb(self, **kwargs: Any) -> None:
        """MQCB: only event handlers are imitated."""
        standin = self._standin
        cbd, operation = kwargs["cbd"], kwargs.get("operation", CMQC.MQOP_REGISTER)
        if cbd.CallbackType != CMQC.MQCBT_EVENT_HANDLER:
            raise NotImplementedError("stand-in: only MQCB event handlers are imitated")
        with standin.cond:
            conn = standin._live(self.hconn)
            conn.handler = cbd.CallbackFunction if operation == CMQC.MQOP_REGISTER else None
            standin._record("MQCB", self.hconn, operation=operation, type=cbd.CallbackType)


def _credentials(standin: StandIn, kwargs: dict[str, Any]) -> tuple[str, str | None, int]:
    """The MQCSP the library would build: ibmmq's ``csp=CSP(CSPUserId=, CSPPassword=)`` (its
    ``UserId``/``Password`` are refused), or ``user=``/``password=`` (both libraries; a user
    without a password is refused, as ibmmq does)."""
    csp = kwargs.get("csp")
    if csp is not None:
        if standin.flavour != "ibmmq":
            raise TypeError("stand-in: pymqi takes user= and password=, not a CSP")
        user, password = csp.CSPUserId, csp.CSPPassword
        if user and csp.AuthenticationType != CMQC.MQCSP_AUTH_USER_ID_AND_PWD:
            raise ValueError("stand-in: a CSP user needs MQCSP_AUTH_USER_ID_AND_PWD")
    else:
        user, password = kwargs.get("user"), kwargs.get("password")
    if user and password is None:
        raise ValueError("Password must not be None if user is provided")
    user = user.decode() if isinstance(user, bytes) else (user or "")
    password = password.decode() if isinstance(password, bytes) else password
    auth = CMQC.MQCSP_AUTH_USER_ID_AND_PWD if user else CMQC.MQCSP_AUTH_NONE
    return user, password, auth


def _commit(conn: _Connection) -> None:
    for queue, message in conn.puts:
        queue.messages.append(message)
    conn.puts.clear()
    conn.gets.clear()


class _Queue:
    """``Queue(qm, name_or_od, options)`` opens at once; put, get, close."""

    _standin: StandIn

    def __init__(self, qm: _QueueManager, desc: Any, options: int):
        standin = self._standin
        if isinstance(desc, (str, bytes)):
            name, qmgr = (desc.decode() if isinstance(desc, bytes) else desc), ""
        else:
            name, qmgr = _text(desc._field("ObjectName")), _text(desc._field("ObjectQMgrName"))
        _check_options("MQOO", options, _OO_SUPPORTED)
        self.hconn, self.name, self.qmgr, self.options = qm.hconn, name, qmgr, options
        with standin.cond:
            standin._record("MQOPEN", self.hconn, queue=name, qmgr=qmgr, options=options)
            self._resolve(standin._live(self.hconn))
        self.open = True

    def _resolve(self, conn: _Connection) -> _LocalQueue:
        manager = conn.qmgr
        if self.qmgr and self.qmgr != manager.name:
            manager = self._standin.qmgrs.get(self.qmgr)
            if manager is None or self.options & _INPUT:
                raise _fail(CMQC.MQRC_UNKNOWN_OBJECT_NAME)
        queue = manager.queues.get(self.name)
        if queue is None:
            raise _fail(CMQC.MQRC_UNKNOWN_OBJECT_NAME)
        return queue

    def put(self, msg: bytes, md: Any = None, pmo: Any = None) -> None:
        """MQPUT (to a topic: one copy to each subscription's queue whose topic string
        matches)."""
        standin = self._standin
        md = md if md is not None else standin.MD()
        pmo = pmo if pmo is not None else standin.PMO()
        if not isinstance(msg, bytes):
            raise TypeError("message must be bytes")
        _check_options("MQPMO", pmo.Options, _PMO_SUPPORTED)
        msg_id, correl_id = md._field("MsgId"), md._field("CorrelId")
        reply_to, reply_qmgr = md._field("ReplyToQ"), md._field("ReplyToQMgr")
        with standin.cond:
            standin._record(
                "MQPUT", self.hconn, queue=self.name, options=pmo.Options, length=len(msg),
                persistence=md.Persistence, msg_type=md.MsgType, msg_id=msg_id,
                correl_id=correl_id, reply_to_q=_text(reply_to), expiry=md.Expiry,
                report=md.Report, format=md._field("Format"))
            conn = standin._live(self.hconn)
            if not self.options & CMQC.MQOO_OUTPUT:
                raise _fail(CMQC.MQRC_NOT_OPEN_FOR_OUTPUT)
            queues = self._targets(conn)
            if any(len(queue.messages) >= queue.max_depth for queue in queues):
                raise _fail(CMQC.MQRC_Q_FULL)
            if pmo.Options & CMQC.MQPMO_NEW_MSG_ID or msg_id == CMQC.MQMI_NONE:
                msg_id = next(standin._ids).to_bytes(24, "big")
            if pmo.Options & CMQC.MQPMO_NEW_CORREL_ID:
                correl_id = next(standin._ids).to_bytes(24, "big")
            if reply_to.strip(b"\0 ") and not reply_qmgr.strip(b"\0 "):
                reply_qmgr = conn.qmgr.name.encode().ljust(48, b"\0")
            fields = {"MsgId": msg_id, "CorrelId": correl_id, "ReplyToQ": reply_to,
                      "ReplyToQMgr": reply_qmgr, "Persistence": md.Persistence,
                      "MsgType": md.MsgType, "Report": md.Report, "Expiry": md.Expiry,
                      "Format": md._field("Format"), "BackoutCount": 0,
                      "PutApplName": conn.appl_name.encode().ljust(28, b"\0")}
            for queue in queues:  # a publication: one copy per matching subscription
                message = _Message(next(standin._orders), msg, dict(fields))
                if pmo.Options & CMQC.MQPMO_SYNCPOINT:  # default on Multiplatforms: none
                    conn.puts.append((queue, message))
                else:
                    queue.messages.append(message)
            standin.cond.notify_all()
        for key in ("MsgId", "CorrelId", "ReplyToQMgr", "PutApplName"):
            setattr(md, key, fields[key])

    def _targets(self, conn: _Connection) -> list[_LocalQueue]:
        return [self._resolve(conn)]

    def get(self, max_length: int | None = None, md: Any = None, gmo: Any = None) -> bytes:
        """MQGET."""
        standin = self._standin
        md = md if md is not None else standin.MD()
        gmo = gmo if gmo is not None else standin.GMO()
        options = gmo.Options
        _check_options("MQGMO", options, _GMO_SUPPORTED)
        if gmo.Version >= CMQC.MQGMO_VERSION_2:
            match = gmo.MatchOptions
        else:  # version 1: the MD's ids select when they are not null
            match = CMQC.MQMO_MATCH_MSG_ID | CMQC.MQMO_MATCH_CORREL_ID
        _check_options("MQMO", match, CMQC.MQMO_MATCH_MSG_ID | CMQC.MQMO_MATCH_CORREL_ID)
        want_msg = md._field("MsgId") if match & CMQC.MQMO_MATCH_MSG_ID else CMQC.MQMI_NONE
        want_correl = md._field("CorrelId") if match & CMQC.MQMO_MATCH_CORREL_ID \
            else CMQC.MQCI_NONE
        wait = gmo.WaitInterval if options & CMQC.MQGMO_WAIT else 0
        deadline = None if wait == CMQC.MQWI_UNLIMITED else time.monotonic() + wait / 1000
        with standin.cond:
            details = {"queue": self.name, "options": options, "wait": wait, "match": match,
                       "msg_id": want_msg, "correl_id": want_correl}
            while True:
                conn = standin._live(self.hconn)
                if not self.options & _INPUT:
                    raise _fail(CMQC.MQRC_NOT_OPEN_FOR_INPUT)
                queue = self._resolve(conn)
                found = next((m for m in queue.messages
                              if want_msg in (CMQC.MQMI_NONE, m.md["MsgId"])
                              and want_correl in (CMQC.MQCI_NONE, m.md["CorrelId"])), None)
                if found is not None:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    standin._record("MQGET", self.hconn, reason=CMQC.MQRC_NO_MSG_AVAILABLE,
                                    **details)
                    raise _fail(CMQC.MQRC_NO_MSG_AVAILABLE)
                standin.cond.wait(left)
            if max_length is not None and len(found.body) > max_length:
                standin._record("MQGET", self.hconn, reason=CMQC.MQRC_TRUNCATED_MSG_FAILED,
                                **details)
                raise MQMIError(CMQC.MQCC_FAILED, CMQC.MQRC_TRUNCATED_MSG_FAILED,
                                original_length=len(found.body))
            queue.messages.remove(found)
            if options & CMQC.MQGMO_SYNCPOINT:
                conn.gets.append((queue, found))
            standin._record("MQGET", self.hconn, reason=0, length=len(found.body), **details)
            for key, value in found.md.items():
                setattr(md, key, value)
            return found.body

    def close(self, options: int = CMQC.MQCO_NONE) -> None:
        """MQCLOSE."""
        standin = self._standin
        with standin.cond:
            standin._record("MQCLOSE", self.hconn, queue=self.name)
            if not self.open:
                raise PYIFError("not open")
            self.open = False
            standin._live(self.hconn)


class _Topic(_Queue):
    """``Topic(qm, topic_string=..., open_opts=...)``: MQOPEN of a topic string (MQOT_TOPIC,
    MQOD version 4) for output; ``pub`` is MQPUT to it."""

    def __init__(self, qm: _QueueManager, topic_name: Any = None, topic_string: Any = None,
                 topic_desc: Any = None, open_opts: int | None = None):
        if topic_desc is not None or topic_name or not open_opts:
            raise NotImplementedError("stand-in: topics are opened by topic string at once")
        standin = self._standin
        self.name = topic_string.decode() if isinstance(topic_string, bytes) else topic_string
        _check_options("MQOO", open_opts, CMQC.MQOO_OUTPUT | CMQC.MQOO_FAIL_IF_QUIESCING)
        self.hconn, self.qmgr, self.options = qm.hconn, "", open_opts
        with standin.cond:
            standin._record("MQOPEN", self.hconn, topic=self.name, options=open_opts)
            standin._live(self.hconn)
        self.open = True

    def _targets(self, conn: _Connection) -> list[_LocalQueue]:
        manager = conn.qmgr
        return [manager.queues[queue] for topic, queue in manager.subscriptions.values()
                if topic_matches(topic, self.name) and queue in manager.queues]

    def pub(self, msg: bytes, md: Any = None, pmo: Any = None) -> None:
        """MQPUT to the topic."""
        self.put(msg, md, pmo)


class _Subscription:
    """``Subscription(qm)``; ``sub(sub_desc=SD, sub_queue=Queue)`` is MQSUB of a durable
    subscription to that queue (MQSO_CREATE and/or MQSO_RESUME); ``close`` keeps it unless
    MQCO_REMOVE_SUB."""

    _standin: StandIn

    def __init__(self, qm: _QueueManager):
        self.hconn, self.name = qm.hconn, ""

    def sub(self, sub_desc: Any, sub_queue: Any) -> None:
        standin, options = self._standin, sub_desc.Options
        _check_options("MQSO", options, CMQC.MQSO_CREATE | CMQC.MQSO_RESUME
                       | CMQC.MQSO_DURABLE | CMQC.MQSO_FAIL_IF_QUIESCING)
        if not options & CMQC.MQSO_DURABLE:
            raise NotImplementedError("stand-in: only durable subscriptions are imitated")
        name, topic = _text(sub_desc.SubName), _text(sub_desc.ObjectString)
        with standin.cond:
            standin._record("MQSUB", self.hconn, sub_name=name, topic=topic, options=options,
                            queue=sub_queue.name)
            manager = standin._live(self.hconn).qmgr
            if sub_queue.hconn != self.hconn or not sub_queue.open \
                    or not sub_queue.options & CMQC.MQOO_OUTPUT:
                raise _fail(CMQC.MQRC_HOBJ_ERROR)
            known = manager.subscriptions.get(name)
            if known is None and not options & CMQC.MQSO_CREATE:
                raise _fail(CMQC.MQRC_NO_SUBSCRIPTION)
            if known is not None and not options & CMQC.MQSO_RESUME:
                raise _fail(CMQC.MQRC_SUB_ALREADY_EXISTS)
            if known is None:
                manager.subscriptions[name] = (topic, sub_queue.name)
        self.name = name

    def close(self, sub_close_options: int = CMQC.MQCO_NONE, **_: Any) -> None:
        standin = self._standin
        with standin.cond:
            standin._record("MQCLOSE", self.hconn, subscription=self.name,
                            options=sub_close_options)
            manager = standin._live(self.hconn).qmgr
            if sub_close_options & CMQC.MQCO_REMOVE_SUB:
                manager.subscriptions.pop(self.name, None)
