"""The controller's check of IBM MQ before any load (drivers/mq/preflight.py): its MQI call
sequence recorded by the MQI stand-in (tests/unit/mqi_standin.py, not IBM MQ), its ``pymqi``
flavour, and the cases without an MQI library.

Why these stay on the stand-in: the first asserts the calls themselves (one MQCONNX for
endpoints that are the same, client reconnection disabled, each queue opened with exactly
MQOO_INQUIRE | MQOO_FAIL_IF_QUIESCING and closed, in that order), which the emulated queue
manager cannot observe; the others run the ``pymqi`` flavour, and no ``pymqi`` can be installed
here. What the queue manager answers (all fine, missing queues, refused credentials, nothing
listening, a CCDT on the controller or not) is tested over IBM's real ``ibmmq`` and the MQI
emulator in test_mqemu_preflight.py."""

from __future__ import annotations

import pytest

from drivers.base import Unchecked
from drivers.depth import preflight
from drivers.mq.client import MqClientMissing
from drivers.mq.preflight import MqPreflight
from drivers.mq.settings import MqSettings
from tests.unit.mqi_standin import CMQC, StandIn

C = CMQC  # IBM's constants (ibmmq.CMQC), as the stand-in uses them
pytestmark = pytest.mark.timeout(60)
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
def test_one_connection_per_distinct_endpoint_each_queue_opened_for_inquire_then_closed(flavour):
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


def test_with_pymqi_a_missing_queue_is_named_with_where_it_was_looked_for():
    standin = StandIn("pymqi", queues=("perf1",))
    with pytest.raises(LookupError) as missing:
        check(standin, [DIRECT], ["perf1", "perf2", "perf3"])
    assert str(missing.value) == f"perf2, perf3 (at {DIRECT})"
    assert standin.named("MQDISC")  # the connection is let go of all the same


def test_with_pymqi_refused_credentials_are_a_connection_error_in_words():
    standin = StandIn("pymqi")
    standin.require_user("perf", "right")
    with pytest.raises(ConnectionError) as refused:
        check(standin, [DIRECT], ["perf"], user="perf", password="wrong-secret")
    text = str(refused.value)
    assert text.startswith(f"{DIRECT}: the queue manager refused the user and password")
    assert "MQRC_NOT_AUTHORIZED 2035" in text and "wrong-secret" not in text
    assert not standin.named("MQOPEN")


def test_without_an_mqi_library_the_check_says_it_cannot_be_made():
    def missing():
        raise MqClientMissing("the IBM MQ driver needs an MQI library for Python: pip install")

    probe = MqPreflight([GROUP], ["perf"], MqSettings(), load=missing)
    with pytest.raises(Unchecked, match="needs an MQI library"):
        probe.check()
    probe.close()


def test_the_check_for_each_broker():
    mq = preflight("ibmmq", [GROUP], ["perf"], {"queue_manager": GROUP, "user": "perf",
                                               "password": "s3cret"})
    assert isinstance(mq, MqPreflight) and mq.settings.user == "perf"
    assert type(preflight("rabbitmq", ["amqp://h:5672"], ["perf"], {})).__name__ == \
        "QueueDepthProbe"
