"""The controller's check of IBM MQ before any load (drivers/mq/preflight.py), against the MQI
stand-in (tests/unit/mqi_standin.py, not IBM MQ): a missing queue, refused credentials, a queue
manager that is down, all fine, and no MQI library on the controller's machine."""

from __future__ import annotations

import pytest

from drivers.base import Unchecked
from drivers.depth import preflight
from drivers.mq.client import MqClientMissing
from drivers.mq.preflight import MqPreflight
from drivers.mq.settings import MqSettings
from tests.unit.mqi_standin import CMQC, StandIn

C = CMQC
GROUP = "*UC01QM"
DIRECT = "mq://qm1.example.com(1414)/QM1?channel=PERF.CHL"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ("MQCCDTURL", "SURGE_MQ_USER", "SURGE_MQ_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def check(standin: StandIn, endpoints: list[str], queues: list[str], **settings) -> None:
    """Run the check with ``standin`` as the MQI library."""
    MqPreflight(endpoints, queues, MqSettings(**settings), load=lambda: standin).check()


@pytest.mark.parametrize("flavour", ["ibmmq", "pymqi"])
def test_all_fine_one_connection_per_distinct_endpoint_each_queue_opened_for_inquire(flavour):
    standin = StandIn(flavour, qmgrs=("UC01QM01", "UC01QM02"), queues=("perf1", "perf2"))
    standin.require_user("perf", "s3cret")
    check(standin, [GROUP, GROUP], ["perf1", "perf2"], ccdt_url="https://ccdt.example/UC01.json",
          user="perf", password="s3cret")
    connects = standin.named("MQCONNX")
    assert len(connects) == 1  # every member's endpoint is *UC01QM: one connection is enough
    seen = connects[0].details
    assert (seen["qmgr"], seen["ccdt_url"], seen["user"], seen["password"]) == \
        (GROUP, "https://ccdt.example/UC01.json", "perf", "s3cret")
    assert seen["options"] & C.MQCNO_RECONNECT_DISABLED and seen["options"] & \
        C.MQCNO_CLIENT_BINDING
    opens = standin.named("MQOPEN")
    assert [o.details["queue"] for o in opens] == ["perf1", "perf2"]
    assert {o.details["options"] for o in opens} == {C.MQOO_INQUIRE | C.MQOO_FAIL_IF_QUIESCING}
    assert [c.name for c in standin.calls if c.name != "MQCONNX"] == \
        ["MQINQ", "MQINQ", "MQOPEN", "MQCLOSE", "MQOPEN", "MQCLOSE", "MQDISC"]
    assert not standin.named("MQPUT", "MQGET")  # nothing sent, nothing taken


def test_each_queue_manager_of_its_own_channel_is_checked():
    standin = StandIn("ibmmq", qmgrs=("QM1", "QM2"), queues=())
    standin.define("perf", qmgr="QM1")
    second = "mq://qm2.example.com(1414)/QM2?channel=PERF.CHL"
    with pytest.raises(LookupError) as missing:
        check(standin, [DIRECT, second], ["perf"])
    assert str(missing.value) == f"perf (at {second})"  # QM1 has it, QM2 does not
    assert [c.details["resolved"] for c in standin.named("MQCONNX")] == ["QM1", "QM2"]


@pytest.mark.parametrize("flavour", ["ibmmq", "pymqi"])
def test_a_missing_queue_is_named_with_where_it_was_looked_for(flavour):
    standin = StandIn(flavour, queues=("perf1",))
    with pytest.raises(LookupError) as missing:
        check(standin, [DIRECT], ["perf1", "perf2", "perf3"])
    assert str(missing.value) == f"perf2, perf3 (at {DIRECT})"
    assert standin.named("MQDISC")  # the connection is let go of all the same


@pytest.mark.parametrize("flavour", ["ibmmq", "pymqi"])
def test_refused_credentials_are_a_connection_error_in_words_without_the_password(flavour):
    standin = StandIn(flavour)
    standin.require_user("perf", "right")
    with pytest.raises(ConnectionError) as refused:
        check(standin, [DIRECT], ["perf"], user="perf", password="wrong-secret")
    text = str(refused.value)
    assert text.startswith(f"{DIRECT}: the queue manager refused the user and password")
    assert "MQRC_NOT_AUTHORIZED 2035" in text and "wrong-secret" not in text
    assert not standin.named("MQOPEN")


def test_a_queue_manager_that_is_down_is_a_connection_error_in_words():
    standin = StandIn("pymqi")
    standin.stop_qmgr("QM1")
    with pytest.raises(ConnectionError, match=r"QM1\?channel=PERF.CHL: the queue manager is "
                                              r"not available .*MQRC_Q_MGR_NOT_AVAILABLE 2059"):
        check(standin, [DIRECT], ["perf"])


def test_without_an_mqi_library_the_check_says_it_cannot_be_made():
    def missing():
        raise MqClientMissing("the IBM MQ driver needs an MQI library for Python: pip install")

    probe = MqPreflight([GROUP], ["perf"], MqSettings(), load=missing)
    with pytest.raises(Unchecked, match="needs an MQI library"):
        probe.check()
    probe.close()


def test_a_ccdt_file_only_on_the_load_hosts_is_not_pretended_checked(tmp_path):
    standin = StandIn("ibmmq", qmgrs=("UC01QM01",))
    absent = f"file://{tmp_path}/UC01.json"
    with pytest.raises(Unchecked, match="CCDT .*UC01.json is not on the controller's machine"):
        check(standin, [GROUP], ["perf"], ccdt_url=absent)
    assert not standin.named("MQCONNX")
    (tmp_path / "UC01.json").write_text("{}")
    check(standin, [GROUP], ["perf"], ccdt_url=absent)  # there: checked
    assert standin.named("MQOPEN")
    check(StandIn("ibmmq"), [DIRECT], ["perf"],  # a channel of its own: the CCDT is not used
          ccdt_url=f"file://{tmp_path}/other.json")


def test_the_check_for_each_broker():
    mq = preflight("ibmmq", [GROUP], ["perf"], {"queue_manager": GROUP, "user": "perf",
                                               "password": "s3cret"})
    assert isinstance(mq, MqPreflight) and mq.settings.user == "perf"
    assert type(preflight("rabbitmq", ["amqp://h:5672"], ["perf"], {})).__name__ == \
        "QueueDepthProbe"
