"""The arguments of one MQCONNX as a client, built from the driver's settings: which MQI
structures carry what, for IBM's ``ibmmq`` package and for ``pymqi``.

What each structure holds (the names are the libraries' Python fields):

- MQCD (``mqi.CD``), for an endpoint with a connection name of its own: ``ChannelName``,
  ``ConnectionName``, ``ChannelType`` MQCHT_CLNTCONN, ``TransportType`` MQXPT_TCP and, with TLS,
  ``SSLCipherSpec`` (both libraries raise the MQCD version for it). Without a connection name
  there is no MQCD: the CCDT names the channels of the queue manager or ``*GROUP``.
- MQSCO (``mqi.SCO``), with TLS: ``KeyRepository`` (the key database's stem) and
  ``CertificateLabel``; a key repository password goes in ``KeyRepoPassword`` where the library
  has it (``ibmmq``, MQSCO version 6), else in the ``MQKEYRPWD`` environment variable the MQ
  client reads at connect time (a stash file beside the key database needs neither).
- MQCNO (``ibmmq``'s ``mqi.CNO``): ``Options`` (client binding, shared handles, reconnect),
  ``CCDTUrl`` (version 6) and ``ApplName`` (the APPLTAG, version 7); ``pymqi`` takes the options
  as ``opts`` and the CCDT and application name from ``MQCCDTURL`` and ``MQAPPLNAME``.
- MQCSP, where the channel asks for credentials: ``ibmmq``'s ``mqi.CSP`` with ``CSPUserId``,
  ``CSPPassword`` and ``AuthenticationType`` MQCSP_AUTH_USER_ID_AND_PWD (the library sets the C
  structure's ``CSPUserIdPtr``/``CSPPasswordPtr`` from them); ``pymqi`` builds its MQCSP from
  ``user=`` and ``password=``.

The user and password are ``MqSettings.user``/``password`` (the topology's credentials, sent
over the agents' control channel), else ``SURGE_MQ_USER``/``SURGE_MQ_PASSWORD`` in the agent's
environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from drivers.mq.client import MqEndpoint, environment
from drivers.mq.settings import MqSettings


@dataclass
class ConnectArgs:
    """``QueueManager.connect_with_options(qmgr, **kwargs)`` under environment ``env``."""

    qmgr: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        """Which structures and options, never the credentials they carry."""
        return f"ConnectArgs(qmgr={self.qmgr!r}, kwargs={sorted(self.kwargs)})"


def connect(mqi: Any, settings: MqSettings, endpoint: str, appltag: str, options: int) -> Any:
    """MQCONNX as a client to ``endpoint`` with application name ``appltag`` and MQCNO
    ``options``; the connected ``QueueManager`` (the library's ``Error`` if it fails)."""
    args = connect_args(mqi, settings, MqEndpoint.parse(endpoint, settings), appltag, options)
    qm = mqi.QueueManager(None)
    with environment(args.env):
        qm.connect_with_options(args.qmgr, **args.kwargs)
    return qm


def connect_args(mqi: Any, settings: MqSettings, target: MqEndpoint, appltag: str,
                 options: int) -> ConnectArgs:
    """The MQCONNX arguments that reach ``target`` as a client with MQCNO ``options`` and
    application name ``appltag`` (see the module docstring)."""
    args = ConnectArgs(target.qmgr)
    if target.conname:
        args.kwargs["cd"] = _channel(mqi, settings, target)
    if settings.tls_key_repository:
        args.kwargs["sco"] = _tls(mqi, settings, args.env)
    ccdt = "" if target.conname else settings.ccdt_url
    if hasattr(mqi, "CNO"):  # ibmmq: MQCNO with CCDTUrl (MQ 9.0) and ApplName (9.1.2)
        args.kwargs["cno"] = _cno(mqi, options, ccdt, appltag, args.env)
    else:  # pymqi: MQCNO Options only; the rest through the client's environment
        args.kwargs["opts"] = options
        if ccdt:
            args.env["MQCCDTURL"] = ccdt
        if appltag:
            args.env["MQAPPLNAME"] = appltag
    _credentials(mqi, settings, args.kwargs)
    return args


def _channel(mqi: Any, settings: MqSettings, target: MqEndpoint) -> Any:
    cd = mqi.CD()
    cd.ChannelName = target.channel.encode()
    cd.ConnectionName = target.conname.encode()
    cd.ChannelType = mqi.CMQXC.MQCHT_CLNTCONN
    cd.TransportType = mqi.CMQXC.MQXPT_TCP
    if settings.tls_cipher_spec:
        cd.SSLCipherSpec = settings.tls_cipher_spec.encode()
    return cd


def _tls(mqi: Any, settings: MqSettings, env: dict[str, str]) -> Any:
    sco = mqi.SCO()
    sco.KeyRepository = settings.tls_key_repository.encode()
    if settings.tls_certificate_label:
        sco.CertificateLabel = settings.tls_certificate_label.encode()
    secret = settings.tls_key_repository_password
    if secret and hasattr(mqi, "CNO") and hasattr(sco, "KeyRepoPassword"):  # ibmmq, MQ 9.3
        sco.KeyRepoPassword = secret
        sco.Version = max(sco.Version, getattr(mqi.CMQC, "MQSCO_VERSION_6", 6))
    elif secret:
        env["MQKEYRPWD"] = secret
    return sco


def _cno(mqi: Any, options: int, ccdt: str, appltag: str, env: dict[str, str]) -> Any:
    C = mqi.CMQC
    cno = mqi.CNO()
    cno.Options = options
    if ccdt and hasattr(cno, "CCDTUrl"):
        cno.CCDTUrl = ccdt
        cno.Version = max(cno.Version, getattr(C, "MQCNO_VERSION_6", 6))
    elif ccdt:
        env["MQCCDTURL"] = ccdt
    if appltag and hasattr(cno, "ApplName"):
        cno.ApplName = appltag.encode()
        cno.Version = max(cno.Version, getattr(C, "MQCNO_VERSION_7", 7))
    elif appltag:
        env["MQAPPLNAME"] = appltag
    return cno


def _credentials(mqi: Any, settings: MqSettings, kwargs: dict[str, Any]) -> None:
    """MQCSP user and password: the settings', else the agent's environment's."""
    user, password = settings.user, settings.password
    if not user:
        user = os.environ.get("SURGE_MQ_USER", "")
        password = os.environ.get("SURGE_MQ_PASSWORD", "")
    if not user:
        return
    if hasattr(mqi, "CNO") and hasattr(mqi, "CSP"):  # ibmmq: the CSP's own fields
        csp = mqi.CSP()
        csp.AuthenticationType = mqi.CMQC.MQCSP_AUTH_USER_ID_AND_PWD
        csp.CSPUserId = user
        csp.CSPPassword = password
        kwargs["csp"] = csp
    else:  # pymqi builds the MQCSP (CSPUserIdPtr, CSPPasswordPtr) from these
        kwargs["user"] = user
        kwargs["password"] = password
