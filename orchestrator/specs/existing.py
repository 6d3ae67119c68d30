"""Typed model of a cluster surge did not start (``placement: existing``): where its members
are, who surge connects as, TLS, whether surge may declare queues, and the commands that act
on members for scale-out and faults.

RabbitMQ members are given here by URI; IBM MQ queue managers in the topology's ``ibmmq``
section (by ``host(port)`` and channel, or by CCDT and queue manager group), with the
credentials, ``declare`` and commands of this section.
"""

from __future__ import annotations

import string
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from orchestrator.specs.base import Loc, Seconds, Spec
from orchestrator.specs.secrets import Credentials, SpecFile, refuse_userinfo

AMQP_PORTS = {"amqp": 5672, "amqps": 5671}
PLACEHOLDERS = ("index", "name", "count")


def _amqp_uri(text: str) -> str:
    refuse_userinfo(text)
    parts = urlsplit(text)
    if parts.scheme not in AMQP_PORTS or not parts.hostname:
        raise ValueError(f"expected amqp://HOST[:PORT] or amqps://HOST[:PORT] (got {text!r})")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"give the vhost in existing.vhost, not in the URI (got {text!r})")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"the port of {text!r} is not a number") from None
    return text


def _http_url(text: str) -> str:
    refuse_userinfo(text)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected http(s)://HOST:PORT (got {text!r})")
    return text.rstrip("/")


AmqpUri = Annotated[str, AfterValidator(_amqp_uri)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]


class MemberCommands(Spec):
    """Shell commands surge runs to act on a member of a cluster it did not start, with
    ``{index}`` (the member's position, from 0) and ``{name}`` (its name) filled in; each is
    recorded in the run's events like surge's own actions. ``{count}`` is the number of
    members in service once the command has done its work. Without them, scale-out and member
    faults are refused."""

    start_member: str | None = Field(None, min_length=1, description="bring a member into "
                                     "service, e.g. 'kubectl scale sts/rabbit --replicas={count}'")
    stop_member: str | None = Field(None, min_length=1,
                                    description="take a member out of service gracefully")
    kill_member: str | None = Field(None, min_length=1,
                                    description="kill a member at once (fault injection)")
    timeout: Seconds = Field(300.0, gt=0, description="longest a command may run")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Templates use only the placeholders surge fills in."""
        found: list[tuple[Loc, str]] = []
        for name in ("start_member", "stop_member", "kill_member"):
            template = getattr(self, name)
            if template is None:
                continue
            try:
                names = {n for _, n, _, _ in string.Formatter().parse(template) if n is not None}
            except ValueError as error:
                found.append(((name,), f"{error} (write a literal brace as {{{{ or }}}})"))
                continue
            unknown = sorted(names - set(PLACEHOLDERS))
            if unknown:
                found.append(((name,), f"unknown placeholder {{{unknown[0]}}}: a command may use "
                                       f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}"))
        return found


class AmqpTlsSpec(Spec):
    """TLS towards the members (``amqps://``) and their HTTP endpoints (``https://``)."""

    ca_file: SpecFile | None = Field(None, description="CA certificates (PEM) to trust; default "
                                                       "the system's")
    cert_file: SpecFile | None = Field(None, description="client certificate (PEM)")
    key_file: SpecFile | None = Field(None, description="the client certificate's key (PEM)")
    server_name: str | None = Field(None, min_length=1,
                                    description="name the members' certificates must carry; "
                                                "default each URI's host")
    check_server_name: bool = Field(True, description="refuse a certificate whose name does not "
                                                      "match (turn off for test clusters only)")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A client certificate comes with its key."""
        if (self.cert_file is None) != (self.key_file is None):
            return [(("cert_file" if self.cert_file is None else "key_file",),
                     "a client certificate needs both cert_file and key_file")]
        return []


class RabbitMemberSpec(Spec):
    """One member of an existing RabbitMQ cluster."""

    uri: AmqpUri = Field(description="amqp://HOST[:PORT] or amqps://HOST[:PORT], no "
                                     "credentials")
    management: HttpUrl | None = Field(
        None, description="its management API, e.g. https://HOST:15671")
    prometheus: HttpUrl | None = Field(
        None, description="its rabbitmq_prometheus listener, e.g. http://HOST:15692 (/metrics "
                          "and /metrics/per-object are read from it)")

    @property
    def host(self) -> str:
        """The host of the AMQP URI."""
        return urlsplit(self.uri).hostname or ""

    @property
    def port(self) -> int:
        """The AMQP port (the scheme's default where the URI gives none)."""
        parts = urlsplit(self.uri)
        return parts.port or AMQP_PORTS[parts.scheme]

    @property
    def tls(self) -> bool:
        """Whether clients reach it over TLS."""
        return self.uri.startswith("amqps:")


class ExistingSpec(Spec):
    """A cluster surge did not start and does not stop."""

    members: list[RabbitMemberSpec] = Field(
        default_factory=list, max_length=32,
        description="RabbitMQ members; IBM MQ queue managers are given in the ibmmq section")
    vhost: str = Field("/", min_length=1, description="RabbitMQ virtual host")
    credentials: Credentials | None = Field(
        None, description="user and password (RabbitMQ; MQCSP for IBM MQ)")
    tls: AmqpTlsSpec | None = Field(None, description="RabbitMQ TLS; amqps:// URIs use TLS "
                                                      "with the system's CAs without it")
    mechanism: Literal["PLAIN", "EXTERNAL"] = Field(
        "PLAIN", description="how clients authenticate over AMQP: PLAIN (credentials' user and "
                             "password) or EXTERNAL (SASL EXTERNAL: the client certificate of "
                             "tls names the user; the broker needs the "
                             "rabbitmq_auth_mechanism_ssl plugin; PerfTest's -se). The "
                             "management API still takes the credentials, if given")
    declare: bool = Field(False, description="declare the topology's queues; by default they "
                                             "must exist and are checked before any load")
    commands: MemberCommands = Field(
        default_factory=MemberCommands,
        description="commands that stop and start members, for faults and scaling")
