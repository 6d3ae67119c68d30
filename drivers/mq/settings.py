"""The MQ driver's own settings: how its clients find and identify themselves to queue
managers. They travel to agents in :attr:`drivers.protocol.Configure.settings`; the topology's
``ibmmq`` section is where a user sets them, and its provisioner fills them in
(``Provisioner.client_settings``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drivers.protocol import ProtocolError, decode

APPL_NAME_LENGTH = 28  # MQ_APPL_NAME_LENGTH: the longest APPLTAG a queue manager keeps
RECONNECT_MODES = ("", "no", "yes", "qmgr", "disabled")


@dataclass(frozen=True)
class MqSettings:
    """Connection settings every MQ worker of a run shares. Endpoints are
    ``mq://HOST(PORT)/QMNAME?channel=CHL`` (a client channel of its own) or a queue manager
    name / ``*GROUP`` looked up in the CCDT (see :mod:`drivers.mq.driver`).

    ``user``/``password`` and the key repository's password come from the topology's
    credentials, read by the provisioner at run time; they travel only in the Configure
    message over the agents' authenticated control channel and are left out of ``repr``."""

    queue_manager: str = ""  # QM name or *GROUP for endpoints that name none
    channel: str = ""  # SVRCONN channel of mq://host endpoints (default SYSTEM.DEF.SVRCONN)
    ccdt_url: str = ""  # e.g. file:///nfs1/UC01.json; "" = the client's own (MQCCDTURL)
    reconnect: str = ""  # "yes" | "qmgr" | "disabled"; "" or "no": the client's DefRecon
    appltag_sender: str = "mqperf.sender"  # APPLTAG of senders and requesters
    appltag_receiver: str = "mqperf.receiver"  # APPLTAG of receivers and responders
    reply_queue: str = ""  # request-reply: shared reply queue; "" = queue with request->reply
    tls_cipher_spec: str = ""  # e.g. ANY_TLS12_OR_HIGHER for mq://host endpoints
    tls_key_repository: str = ""  # key repository stem (MQSCO KeyRepository)
    tls_certificate_label: str = ""  # the client certificate's label (MQSCO CertificateLabel)
    tls_key_repository_password: str = field(default="", repr=False)  # MQSCO KeyRepoPassword
    user: str = ""  # MQCSP user where the channel asks for credentials ("" = none)
    password: str = field(default="", repr=False)  # MQCSP password: never shown, never logged

    def __post_init__(self) -> None:
        if self.reconnect.strip().lower() not in RECONNECT_MODES:
            raise ValueError(f"reconnect {self.reconnect!r}: expected one of "
                             f"{sorted(m for m in RECONNECT_MODES if m)}")
        for tag in (self.appltag_sender, self.appltag_receiver):
            if len(tag) > APPL_NAME_LENGTH:
                raise ValueError(f"APPLTAG {tag!r} is longer than {APPL_NAME_LENGTH} characters")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MqSettings:
        """The settings from :attr:`~drivers.protocol.Configure.settings`; unknown keys and bad
        values are refused."""
        try:
            return decode(cls, data)
        except ProtocolError as error:
            raise ValueError(f"MQ settings: {error}") from None
