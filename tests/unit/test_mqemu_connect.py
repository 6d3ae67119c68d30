"""How surge's MQ driver connects (drivers/mq/connect.py), over IBM's real ``ibmmq`` and the MQI
emulator (tests/mqemu; NOT IBM MQ), judged by what the queue manager sees (``DISPLAY CONN``:
APPLTAG, USERID, CONNAME; the MQCSP checked as CHCKCLNT(REQUIRED)) and what the client does:
each role's APPLTAG, credentials from the topology or the agent's environment, IBM's MQCSP and
MQSCO structures, a ``*GROUP`` through the CCDT that the client reconnects by itself.

The emulator does not check TLS (MQSCO and SSLCipherSpec are sent, not looked at) nor channel
names: the MQCD and MQSCO fields the driver fills in are asserted on the stand-in
(test_mq_connect.py)."""

from __future__ import annotations

import os

import pytest

from drivers.mq.client import MqEndpoint
from drivers.mq.connect import connect, connect_args
from drivers.mq.settings import MqSettings
from drivers.workers import ReceiverRole
from tests.unit.mqemu_helpers import (  # noqa: F401 (no_mq_threads_left: an autouse fixture)
    PASSWORD,
    USER,
    connections,
    counted,
    drain_with_md,
    endpoint,
    make,
    no_mq_threads_left,
    sender,
    until,
    write_ccdt,
)

pytestmark = pytest.mark.timeout(90)
TLS = {"tls_cipher_spec": "ANY_TLS12_OR_HIGHER", "tls_key_repository": "/var/mqm/ssl/client",
       "tls_certificate_label": "perfclient"}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ("MQCCDTURL", "MQAPPLNAME", "MQKEYRPWD", "SURGE_MQ_USER", "SURGE_MQ_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def options(ibmmq) -> int:
    """MQCNO options as the driver's workers use them, without reconnection."""
    C = ibmmq.CMQC
    return C.MQCNO_CLIENT_BINDING | C.MQCNO_HANDLE_SHARE_BLOCK


def test_each_role_connects_with_its_appltag(emulated_ibmmq, qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    driver = make(emulated_ibmmq, qm1)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    driver.add_sender(sender(driver, rate=50), endpoint(qm1))  # connected till the stop
    until(lambda: counted(driver, "received") >= 3)
    tags = sorted(c["APPLTAG"] for c in connections(qm1))
    driver.stop(3)
    assert tags == ["mqperf.receiver", "mqperf.sender"]  # MQCNO.ApplName (MQCNO version 7)
    assert "MQAPPLNAME" not in os.environ


def test_the_agents_environment_gives_the_credentials_unless_the_topology_does(
        emulated_ibmmq, qmgrs, monkeypatch):
    qm1 = qmgrs.start("QM1", "app", "secret", ["DEFINE QLOCAL('perf')"])
    monkeypatch.setenv("SURGE_MQ_USER", "app")
    monkeypatch.setenv("SURGE_MQ_PASSWORD", "secret")
    driver = make(emulated_ibmmq, qm1, settings=MqSettings(channel="PERF.APP.CHL", **TLS))
    driver.add_sender(sender(driver, rate=50), endpoint(qm1))  # connected till the stop
    until(lambda: counted(driver, "sent") >= 1)
    [seen] = connections(qm1)
    driver.stop(3)
    assert (seen["USERID"], seen["CONNAME"]) == ("app", qm1.conname)
    got = drain_with_md(emulated_ibmmq, qm1, "perf", user="app", password="secret")
    assert got and {md.UserIdentifier.rstrip() for _, md in got} == {b"app"}
    wrong = MqSettings(user="perf", password="other")  # the topology's win: refused here
    with pytest.raises(emulated_ibmmq.MQMIError) as refused:
        connect(emulated_ibmmq, wrong, endpoint(qm1), "t", options(emulated_ibmmq))
    assert refused.value.reason == emulated_ibmmq.CMQC.MQRC_NOT_AUTHORIZED


def test_ibmmq_gets_an_mqcsp_of_its_own_that_the_queue_manager_checks(emulated_ibmmq, qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1 = qmgrs.start("QM1", "perf", "s3cret")
    settings = MqSettings(user="perf", password="s3cret")
    args = connect_args(ibmmq, settings, MqEndpoint("QM1", qm1.conname, "CHL"), "tag",
                        options(ibmmq))
    assert isinstance(args.kwargs["csp"], ibmmq.CSP)
    assert "user" not in args.kwargs and "password" not in args.kwargs
    assert "s3cret" not in repr(args)
    qm = connect(ibmmq, settings, endpoint(qm1), "tag", options(ibmmq))
    assert [(c["USERID"], c["APPLTAG"]) for c in connections(qm1)] == [("perf", "tag")]
    qm.disconnect()
    for wrong in (MqSettings(user="perf", password="wrong"), MqSettings()):
        with pytest.raises(ibmmq.MQMIError) as refused:
            connect(ibmmq, wrong, endpoint(qm1), "tag", options(ibmmq))
        assert (refused.value.comp, refused.value.reason) == (C.MQCC_FAILED,
                                                               C.MQRC_NOT_AUTHORIZED)
    assert connections(qm1) == []


def test_a_key_repository_password_goes_in_ibmmqs_mqsco_version_6(emulated_ibmmq, qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1 = qmgrs.start("QM1")
    settings = MqSettings(tls_key_repository_password="kdb-pass", **TLS)
    args = connect_args(ibmmq, settings, MqEndpoint("QM1", qm1.conname, "CHL"), "", 0)
    sco = args.kwargs["sco"]
    assert isinstance(sco, ibmmq.SCO) and sco.KeyRepoPassword == "kdb-pass"
    assert sco.Version == C.MQSCO_VERSION_6 and not args.env
    qm = connect(ibmmq, settings, endpoint(qm1), "tls", options(ibmmq))  # IBM's packing of it
    assert [c["APPLTAG"] for c in connections(qm1)] == ["tls"]
    qm.disconnect()
    assert "MQKEYRPWD" not in os.environ


def test_the_group_through_the_ccdt_is_reconnected_by_the_client(emulated_ibmmq, qmgrs,
                                                                 tmp_path, monkeypatch):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    monkeypatch.setenv("MQEMU_RECONNECT_TIMEOUT_S", "10")
    first, second = qmgrs.start("UC01QM01"), qmgrs.start("UC01QM02")
    url = write_ccdt(tmp_path / "UC01.json", [("PERF.APP.CHL", "UC01QM", first, 0),
                                             ("PERF.APP.CHL", "UC01QM", second, 0)])
    settings = MqSettings(ccdt_url=url, reconnect="yes")
    driver = make(ibmmq, first, endpoints=("*UC01QM",), settings=settings)
    qm = driver.connect("*UC01QM", "mqperf.sender")

    def reached() -> str:
        return qm.inquire(C.MQCA_Q_MGR_NAME).rstrip(b"\0 ").decode()

    assert reached() == "UC01QM01"  # CLNTWGHT(0): the first channel of the CCDT
    assert [c["USERID"] for c in connections(first)] == ["emulated"]  # no MQCSP
    first.stop()
    assert reached() == "UC01QM02"  # MQCNO_RECONNECT: the same connection, reconnected
    assert [c["APPLTAG"] for c in connections(second)] == ["mqperf.sender"]
    qm.disconnect()
    driver.stop(1)
    assert "MQCCDTURL" not in os.environ  # MQCNO.CCDTUrl, not the environment
