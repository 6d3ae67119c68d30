"""A STAND-IN for the MQI library (``pymqi`` / IBM's ``ibmmq``) in unit tests. It is NOT IBM MQ.

It records every MQI call in :attr:`StandIn.calls`, for the tests that are about the call
sequence itself (which options, in which order: test_mq_driver.py, test_mq_connect.py,
test_mq_preflight.py) and for the ``pymqi`` flavour, which cannot be installed here. What the
client and the queue manager do is tested over IBM's real ``ibmmq`` and the MQI emulator
(tests/mqemu, the test_mqemu_*.py files). The same Python API as the libraries
(``QueueManager``, ``Queue``, ``MD``/``GMO``/``PMO``/``OD``/``CD``/``SCO``, ``CNO``/``CBD`` in
the ``ibmmq`` flavour, ``MQMIError`` with ``comp``/``reason``), ``CMQC``/``CMQXC`` being IBM's
own constant modules from the installed ``ibmmq`` package, backed by in-memory queues.

It imitates only behaviour documented for MQ, and only what the driver uses:

- MQCONNX: a client finds its channel in an MQCD, else a CCDT (``MQCNO.CCDTUrl`` - honoured
  from CNO Version 6 - or the ``MQCCDTURL`` environment variable at connect time), else fails
  with MQRC_Q_MGR_NAME_ERROR. The CCDT file is recorded, not read. ``*GROUP`` or "" connect
  to the first queue manager (the stand-in does not model group membership), a name to
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
  where they were, BackoutCount + 1, after MQBACK.
- MQCB registers (records) an event handler; no event is ever delivered.
- MQDISC commits a unit of work (MQ on Multiplatforms does).

Not imitated (options for them raise NotImplementedError): browsing, truncated-message
acceptance, data conversion, message groups, expiry, priorities, persistence to disk, security
beyond the user check above, channels, clustering beyond the delivery above, topics and
subscriptions, broken connections and reconnection (all of these but the first five are
tested on the MQI emulator).
"""

from __future__ import annotations

import bisect
import importlib.util
import itertools
import os
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple


def _ibm_constants(name: str) -> ModuleType:
    """IBM's own constants module ``ibmmq.<name>`` (CMQC, CMQXC), read from the installed
    ``ibmmq`` package's file without importing the package (whose C extension needs an MQ
    client library): one table of MQI constants, IBM's, for the stand-in and its tests."""
    spec = importlib.util.find_spec("ibmmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the MQI stand-in takes its constants from IBM's ibmmq package: "
                          "pip install 'ibmmq>=2.1'")
    path = Path(spec.submodule_search_locations[0]) / f"{name}.py"
    loaded = importlib.util.spec_from_file_location(f"_ibmmq_{name}", path)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


CMQC = _ibm_constants("CMQC")
CMQXC = _ibm_constants("CMQXC")
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
                              "ResolvedQName": b"", "ResolvedQMgrName": b""}),
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
        self.name = name
        self.queues: dict[str, _LocalQueue] = {}


class _Connection:
    def __init__(self, hconn: int, qmgr: _QMgr, requested: str, options: int, appl: str):
        self.hconn, self.qmgr, self.requested = hconn, qmgr, requested
        self.options, self.appl_name = options, appl
        self.gets: list[tuple[_LocalQueue, _Message]] = []  # the unit of work
        self.puts: list[tuple[_LocalQueue, _Message]] = []
        self.handler: Any = None

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
        for name in ("MD", "GMO", "PMO", "OD", "CD", "SCO"):
            setattr(self, name, structures[name])
        if flavour == "ibmmq":  # pymqi's CSP has only C pointer fields: user= / password=
            self.CNO, self.CBD, self.CSP = structures["CNO"], structures["CBD"], structures["CSP"]
        standin = self
        base = _IbmmqQueueManager if flavour == "ibmmq" else _QueueManager
        self.QueueManager = type("QueueManager", (base,), {"_standin": standin})
        self.Queue = type("Queue", (_Queue,), {"_standin": standin})

    # -- set-up and inspection for tests -----------------------------------------------------

    def define(self, queue: str, qmgr: str | None = None, max_depth: int = 5000) -> None:
        """DEFINE QLOCAL on ``qmgr`` (default: every queue manager, as the -ic file does)."""
        for manager in [self.qmgrs[qmgr]] if qmgr else self.qmgrs.values():
            manager.queues[queue] = _LocalQueue(queue, max_depth)

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

    # -- internals -------------------------------------------------------------------------

    def _record(self, name: str, hconn: int, **details: Any) -> None:
        self.calls.append(Call(name, hconn, threading.current_thread().name, time.monotonic(),
                               details))

    def _resolve(self, requested: str) -> _QMgr:
        if requested[:1] in ("*", ""):
            return next(iter(self.qmgrs.values()))
        manager = self.qmgrs.get(requested)
        if manager is None:
            raise _fail(CMQC.MQRC_Q_MGR_NAME_ERROR)
        return manager

    def _live(self, hconn: int) -> _Connection:
        conn = self.connections.get(hconn)
        if conn is None:
            raise _fail(CMQC.MQRC_HCONN_ERROR)
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
            standin.connections[self.hconn] = conn
            if not shared:
                standin._unshared[thread] = self.hconn
            standin._record("MQCONNX", self.hconn, reason=0, resolved=manager.name, **details)

    def inquire(self, selector: int) -> bytes:
        """MQINQ of the queue manager: its description and version only."""
        standin = self._standin
        with standin.cond:
            standin._record("MQINQ", self.hconn, selector=selector)
            standin._live(self.hconn)
        answers = {CMQC.MQCA_Q_MGR_DESC: b"stand-in queue manager".ljust(64),
                   CMQC.MQCA_VERSION: b"09030000"}
        if selector not in answers:
            raise _fail(CMQC.MQRC_SELECTOR_ERROR)
        return answers[selector]

    def commit(self) -> None:
        """MQCMIT."""
        standin = self._standin
        with standin.cond:
            standin._record("MQCMIT", self.hconn)
            _commit(standin._live(self.hconn))
            standin.cond.notify_all()

    def backout(self) -> None:
        """MQBACK."""
        standin = self._standin
        with standin.cond:
            standin._record("MQBACK", self.hconn)
            standin._live(self.hconn).backout()
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
        """MQPUT."""
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
            queue = self._resolve(conn)
            if len(queue.messages) >= queue.max_depth:
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
            message = _Message(next(standin._orders), msg, dict(fields))
            if pmo.Options & CMQC.MQPMO_SYNCPOINT:  # default on Multiplatforms: none
                conn.puts.append((queue, message))
            else:
                queue.messages.append(message)
            standin.cond.notify_all()
        for key in ("MsgId", "CorrelId", "ReplyToQMgr", "PutApplName"):
            setattr(md, key, fields[key])

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
