"""The AMQP driver's own settings: who its clients connect as, to which virtual host, and
over what TLS. They travel to agents in :attr:`drivers.protocol.Configure.settings` (the
agents' authenticated control channel), never in endpoints, command lines or files; the
provisioner fills them in (``Provisioner.client_settings``).

Endpoints are ``amqp://HOST:PORT`` or ``amqps://HOST:PORT`` (TLS), without credentials.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pika

from drivers.protocol import ProtocolError, decode
from orchestrator.tls import TlsMaterial

PORTS = {"amqp": 5672, "amqps": 5671}


@dataclass(frozen=True)
class AmqpSettings:
    """Credentials, virtual host and TLS every AMQP connection of a run shares."""

    user: str = "guest"
    password: str = field(default="guest", repr=False)
    vhost: str = "/"
    tls: TlsMaterial | None = None  # for amqps:// endpoints; None: the system's CAs
    mechanism: str = "PLAIN"  # or EXTERNAL: the TLS client certificate names the user

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AmqpSettings:
        """The settings from :attr:`~drivers.protocol.Configure.settings` (``{}``: guest on
        the default virtual host); unknown keys and bad values are refused."""
        try:
            return decode(cls, data)
        except ProtocolError as error:
            raise ValueError(f"AMQP settings: {error}") from None

    def parameters(self, endpoint: str, contexts: dict[str, ssl.SSLContext] | None = None
                   ) -> pika.ConnectionParameters:
        """Connection parameters for ``endpoint``; ``contexts`` caches the one TLS context
        (building it reads certificates) across the connections of a driver."""
        parts = urlsplit(endpoint)
        if parts.scheme not in PORTS or not parts.hostname or parts.username:
            raise ValueError(f"AMQP endpoint {parts.scheme}://{parts.hostname}: expected "
                             f"amqp://HOST:PORT or amqps://HOST:PORT without credentials")
        options = None
        if parts.scheme == "amqps":
            cache = contexts if contexts is not None else {}
            if "tls" not in cache:
                cache["tls"] = (self.tls or TlsMaterial()).context()
            options = pika.SSLOptions(cache["tls"], (self.tls or TlsMaterial()).name_for(
                parts.hostname))
        return pika.ConnectionParameters(
            host=parts.hostname, port=parts.port or PORTS[parts.scheme],
            virtual_host=self.vhost, credentials=pika.credentials.ExternalCredentials()
            if self.mechanism == "EXTERNAL" else pika.PlainCredentials(self.user, self.password),
            ssl_options=options)

