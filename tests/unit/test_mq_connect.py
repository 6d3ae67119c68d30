"""The MQCONNX arguments the MQ driver builds (drivers/mq/connect.py), as the MQI stand-in
(tests/unit/mqi_standin.py, not IBM MQ) records them.

Why these stay on the stand-in: they assert the arguments themselves where nothing downstream
can observe them: the MQCD's channel name and cipher spec and the MQSCO's key repository and
certificate label (the MQI emulator checks neither TLS nor channel names), and the ``pymqi``
flavour (no ``pymqi`` can be installed here): ``user=``/``password=``, ``opts=``, MQCCDTURL and
MQKEYRPWD. What the client and the queue manager do with IBM's ``ibmmq`` structures (MQCSP
checked, USERID and APPLTAG shown, MQSCO version 6 packed, a ``*GROUP`` through the CCDT
reconnected by the client) is tested over the real ``ibmmq`` and the emulator in
test_mqemu_connect.py."""

from __future__ import annotations

import os

import pytest

from drivers.mq.client import MqEndpoint
from drivers.mq.connect import connect_args
from drivers.mq.driver import MqDriver
from drivers.mq.settings import MqSettings
from drivers.protocol import Destination
from drivers.workers import Recorder
from tests.unit.mqi_standin import CMQC, StandIn

C = CMQC  # IBM's constants (ibmmq.CMQC), as the stand-in uses them
pytestmark = pytest.mark.timeout(60)
DIRECT = "mq://qm1.example.com(1414)/QM1?channel=PERF.TLS.CHL"
TLS = {"tls_cipher_spec": "ANY_TLS12_OR_HIGHER", "tls_key_repository": "/var/mqm/ssl/client",
       "tls_certificate_label": "perfclient"}


def connect(flavour: str, endpoint: str, qmgrs=("QM1",), **settings) -> dict:
    """One MQCONNX through the driver; what the stand-in library was given."""
    standin = StandIn(flavour, qmgrs=qmgrs)
    driver = MqDriver(Destination(endpoints=(endpoint,), queue="perf"), Recorder(),
                      MqSettings(**settings), mqi=standin)
    driver.connect(endpoint, "mqperf.sender").disconnect()
    return standin.named("MQCONNX")[0].details


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ("MQCCDTURL", "MQKEYRPWD", "SURGE_MQ_USER", "SURGE_MQ_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("flavour", ["ibmmq", "pymqi"])
def test_a_direct_channel_with_tls_and_credentials(flavour):
    seen = connect(flavour, DIRECT, user="perf", password="s3cret", **TLS)
    assert seen == {**seen, "qmgr": "QM1", "channel": "PERF.TLS.CHL",
                    "conname": "qm1.example.com(1414)", "channel_type": 6, "transport": 2,
                    "cipher": "ANY_TLS12_OR_HIGHER", "key_repository": "/var/mqm/ssl/client",
                    "certificate_label": "perfclient", "ccdt_url": "",
                    "user": "perf", "password": "s3cret",
                    "authentication": C.MQCSP_AUTH_USER_ID_AND_PWD}


def test_pymqi_gets_user_and_password_not_an_mqcsp():
    pymqi = connect_args(StandIn("pymqi"), MqSettings(user="perf", password="s3cret"),
                         MqEndpoint("QM1", "h(1414)", "CHL"), "tag", C.MQCNO_CLIENT_BINDING)
    assert (pymqi.kwargs["user"], pymqi.kwargs["password"]) == ("perf", "s3cret")
    assert "csp" not in pymqi.kwargs and "s3cret" not in repr(pymqi)


def test_with_pymqi_the_group_through_mqccdturl_reconnectable():
    seen = connect("pymqi", "*UC01QM", qmgrs=("UC01QM01", "UC01QM02"),
                   ccdt_url="file:///nfs1/UC01.json", reconnect="yes")
    assert (seen["qmgr"], seen["conname"], seen["channel"], seen["ccdt_url"]) == \
        ("*UC01QM", "", "", "file:///nfs1/UC01.json")
    assert seen["options"] & C.MQCNO_RECONNECT and seen["options"] & C.MQCNO_CLIENT_BINDING
    assert seen["user"] == "" and seen["password"] is None  # no credentials asked for
    assert "MQCCDTURL" not in os.environ  # set only around the connect


def test_with_pymqi_a_key_repository_password_goes_in_mqkeyrpwd_around_the_connect():
    seen = connect("pymqi", DIRECT, tls_key_repository_password="kdb-pass", **TLS)
    assert seen["key_repository_password"] == "kdb-pass"
    args = connect_args(StandIn("pymqi"), MqSettings(tls_key_repository_password="kdb-pass",
                                                     **TLS),
                        MqEndpoint("QM1", "h(1414)", "CHL"), "", 0)
    assert args.env == {"MQKEYRPWD": "kdb-pass"} and "MQKEYRPWD" not in os.environ


def test_the_password_never_shows_in_the_settings_repr():
    settings = MqSettings(user="perf", password="s3cret", tls_key_repository_password="kdb")
    assert "s3cret" not in repr(settings) and "kdb" not in repr(settings)
    assert "perf" in repr(settings)
    assert MqSettings.from_json({"user": "perf", "password": "s3cret"}).password == "s3cret"
