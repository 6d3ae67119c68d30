"""The controller's check of IBM MQ before any load: the run's clients can connect, and the
workload's queues exist.

For each distinct endpoint (``*GROUP`` through the CCDT, or ``mq://HOST(PORT)/QM?channel=``)
one MQCONNX as the run's senders make it (the run's ``MqSettings``: MQCSP user and password, TLS,
the CCDT; their APPLTAG; client reconnection disabled, so a failure shows at once), then an
MQOPEN of each queue with ``MQOO_INQUIRE | MQOO_FAIL_IF_QUIESCING``, which neither puts nor gets
a message, and an MQCLOSE; then MQDISC. Through ``*GROUP`` that is one queue manager of the
group, whichever the CCDT gives; the others are not looked at.

What the reasons mean: MQRC_UNKNOWN_OBJECT_NAME (2085) on the open is a missing queue
(``LookupError``); every other failure is a ``ConnectionError`` that names the endpoint and says
why in words (MQRC_NOT_AUTHORIZED 2035: the user and password, or CHLAUTH; 2538/2059: nothing
answers / the queue manager is not available; 2393, 2397 and the other TLS reasons: TLS).
With bindings on queue managers surge did not start, :meth:`MqPreflight.subscribe` then makes
their durable subscriptions with MQSUB at each endpoint. Where the check cannot be made on this
machine (no MQI library: :class:`MqClientMissing`; a
``file://`` CCDT that is only on the clients' machines) it raises :class:`Unchecked`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

from drivers.base import Unchecked
from drivers.mq.client import MqClientMissing, MqEndpoint, load_mqi
from drivers.mq.connect import connect
from drivers.mq.settings import MqSettings
from drivers.mq.topics import subscribe
from orchestrator.specs.mqtopics import Subscription

MISSING = "MQRC_UNKNOWN_OBJECT_NAME"
NOT_AUTHORIZED = "MQRC_NOT_AUTHORIZED"
WORDS = {
    NOT_AUTHORIZED: "the queue manager refused the user and password, or does not let this "
                    "user connect through this channel (CONNAUTH, CHLAUTH)",
    "MQRC_HOST_NOT_AVAILABLE": "nothing answers at the connection name (no listener there, or "
                               "the host cannot be reached)",
    "MQRC_Q_MGR_NOT_AVAILABLE": "the queue manager is not available (not running, its listener "
                                "or channel stopped, or the channel refused the connection: see "
                                "the queue manager's AMQERR01.LOG)",
    "MQRC_Q_MGR_NAME_ERROR": "no such queue manager there (the name or *GROUP is not the one at "
                             "that address, or not in the CCDT)",
    "MQRC_UNKNOWN_CHANNEL_NAME": "the queue manager has no such server-connection channel",
    "MQRC_SSL_INITIALIZATION_ERROR": "TLS could not start (the key repository, its password or "
                                     "stash file, the certificate label or the cipher spec)",
    "MQRC_JSSE_ERROR": "TLS: the handshake failed",
    "MQRC_KEY_REPOSITORY_ERROR": "TLS: the key repository cannot be read",
    "MQRC_SSL_CONFIG_ERROR": "TLS: the client's TLS settings are wrong",
    "MQRC_SSL_NOT_ALLOWED": "TLS is asked for where this connection cannot use it",
    "MQRC_SSL_PEER_NAME_MISMATCH": "TLS: the queue manager's certificate is not the expected "
                                   "peer",
    "MQRC_UNSUPPORTED_CIPHER_SUITE": "TLS: the cipher spec is not supported",
    "MQRC_SSL_CERTIFICATE_REVOKED": "TLS: a certificate has been revoked",
    "MQRC_SSL_CERT_STORE_ERROR": "TLS: the certificate store cannot be read",
}


class MqPreflight:
    """The check of :mod:`this module <drivers.mq.preflight>` for ``endpoints`` and ``queues``
    with the run's ``settings``; ``load`` gives the MQI module (default :func:`load_mqi`)."""

    def __init__(self, endpoints: list[str], queues: list[str], settings: MqSettings,
                 load: Callable[[], ModuleType] = load_mqi):
        self.endpoints = list(dict.fromkeys(endpoints))  # *GROUP for every member: once
        self.queues = list(queues)
        self.settings = settings
        self.load = load
        self.identity: dict[str, Any] | None = None

    def check(self) -> None:
        """Connect to every endpoint and open every queue for inquire (see the module
        docstring): ``ConnectionError`` for the first endpoint that refuses, ``LookupError``
        listing the queues that do not exist and where, :class:`Unchecked` where the check
        cannot be made here."""
        try:
            mqi = self.load()
        except MqClientMissing as error:
            raise Unchecked(str(error)) from None
        self._ccdt_is_here()
        missing = []
        for endpoint in self.endpoints:
            absent = self._check_endpoint(mqi, endpoint)
            if absent:
                missing.append(f"{', '.join(absent)} (at {endpoint})")
        if missing:
            raise LookupError("; ".join(missing))

    def _ccdt_is_here(self) -> None:
        """A ``file://`` CCDT that endpoints look their queue manager up in must be on this
        machine too (the SSH placement writes it on the load hosts only)."""
        url = self.settings.ccdt_url
        uses_ccdt = any(not self._target(e).conname for e in self.endpoints)
        if uses_ccdt and url.startswith("file://"):
            path = unquote(urlsplit(url).path)
            if not os.path.isfile(path):
                raise Unchecked(f"the clients' CCDT {url} is not on the controller's machine")

    def _target(self, endpoint: str) -> MqEndpoint:
        try:
            return MqEndpoint.parse(endpoint, self.settings)
        except ValueError as error:
            raise ConnectionError(f"{endpoint}: {error}") from None

    @contextlib.contextmanager
    def _connected(self, mqi: ModuleType, endpoint: str) -> Iterator[Any]:
        """A connection to ``endpoint`` as the run's senders make it, client reconnection off
        (a refusal is a ``ConnectionError`` saying why); disconnected on leaving."""
        C = mqi.CMQC
        error_type = getattr(mqi, "Error", mqi.MQMIError)
        self._target(endpoint)
        options = (C.MQCNO_CLIENT_BINDING | C.MQCNO_HANDLE_SHARE_BLOCK
                   | C.MQCNO_RECONNECT_DISABLED)
        try:
            qm = connect(mqi, self.settings, endpoint, self.settings.appltag_sender, options)
        except error_type as error:
            raise ConnectionError(f"{endpoint}: {explain(mqi, error)}") from None
        try:
            yield qm
        finally:
            with contextlib.suppress(Exception):
                qm.disconnect()

    def identify(self) -> dict[str, Any] | None:
        """What the first queue manager :meth:`check` reached said it is (None: not asked):
        ``product``, ``version`` (V.R.M.F), ``description`` (its DESCR) and ``emulated``: a
        queue manager whose description begins with ``EMULATED`` is taken at its word for a
        test emulator (tests/mqemu), and the run is labelled as one."""
        return self.identity

    def _check_endpoint(self, mqi: ModuleType, endpoint: str) -> list[str]:
        """Connect to ``endpoint`` and open each queue; the queues it does not have."""
        error_type = getattr(mqi, "Error", mqi.MQMIError)
        with self._connected(mqi, endpoint) as qm:
            if self.identity is None:
                self.identity = _identity(mqi, qm, error_type)
            return [queue for queue in self.queues
                    if not self._opens(mqi, qm, endpoint, queue, error_type)]

    @staticmethod
    def _opens(mqi: ModuleType, qm: Any, endpoint: str, queue: str, error_type: type) -> bool:
        """MQOPEN ``queue`` for inquire and close it: ``True``; ``False`` if it does not exist;
        ``ConnectionError`` if the open fails for another reason."""
        C = mqi.CMQC
        try:
            opened = mqi.Queue(qm, queue, C.MQOO_INQUIRE | C.MQOO_FAIL_IF_QUIESCING)
        except error_type as error:
            name = reason_name(mqi, getattr(error, "reason", None))
            if name == MISSING:
                return False
            if name == NOT_AUTHORIZED:
                raise ConnectionError(
                    f"{endpoint}: the user may not open queue {queue} for inquire "
                    f"({NOT_AUTHORIZED} 2035; the check before the load opens each queue "
                    f"for inquire: grant +inq with the clients' +put/+get)") from None
            raise ConnectionError(f"{endpoint}: opening queue {queue}: "
                                  f"{explain(mqi, error)}") from None
        with contextlib.suppress(Exception):
            opened.close()
        return True

    def subscribe(self, subscriptions: list[Subscription]) -> None:
        """Make (or resume) ``subscriptions`` with MQSUB at every endpoint
        (:func:`drivers.mq.topics.subscribe`): ``LookupError`` naming those whose queue is
        missing, ``ConnectionError`` for a refused connection or MQSUB."""
        mqi = self.load()
        error_type = getattr(mqi, "Error", mqi.MQMIError)
        for endpoint in self.endpoints:
            with self._connected(mqi, endpoint) as qm:
                try:
                    missing = subscribe(mqi, qm, subscriptions)
                except error_type as error:
                    raise ConnectionError(f"{endpoint}: subscribing: "
                                          f"{explain(mqi, error)}") from None
            if missing:
                raise LookupError(f"{', '.join(missing)} (at {endpoint})")

    def close(self) -> None:
        """Nothing to let go of: :meth:`check` disconnects from each endpoint as it goes."""


def _identity(mqi: ModuleType, qm: Any, error_type: type) -> dict[str, Any]:
    """The queue manager's MQINQ of its description and version (MQCA_Q_MGR_DESC,
    MQCA_VERSION; a level without MQCA_VERSION or a refused inquiry leaves it blank)."""
    C = mqi.CMQC

    def inquire(selector: int) -> str:
        try:
            value = qm.inquire(selector)
        except error_type:
            return ""
        return (value.decode("utf-8", "replace") if isinstance(value, bytes)
                else str(value)).strip(" \0")

    description, vrmf = inquire(C.MQCA_Q_MGR_DESC), inquire(C.MQCA_VERSION)
    version = ".".join(str(int(vrmf[i:i + 2])) for i in range(0, 8, 2)) \
        if len(vrmf) == 8 and vrmf.isdigit() else vrmf
    return {"product": "IBM MQ", "version": version, "description": description,
            "emulated": description.upper().startswith("EMULATED")}


def reason_name(mqi: ModuleType, reason: int | None) -> str | None:
    """The ``MQRC_`` name of ``reason`` in the library's constants (``None``: not one)."""
    if reason is None:
        return None
    C = mqi.CMQC
    names = [*WORDS, MISSING, *(name for name in dir(C) if name.startswith("MQRC_"))]
    return next((name for name in names if getattr(C, name, None) == reason), None)


def explain(mqi: ModuleType, error: BaseException) -> str:
    """Why an MQI call failed, in words, with the reason's name and number."""
    reason = getattr(error, "reason", None)
    name = reason_name(mqi, reason)
    if name in WORDS:
        return f"{WORDS[name]} ({name} {reason})"
    if reason is not None:
        return f"{name or 'MQRC'} {reason}: {error}"
    return f"{type(error).__name__}: {error}"
