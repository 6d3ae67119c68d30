"""The controller's check of IBM MQ before any load (drivers/mq/preflight.py) over IBM's real
``ibmmq`` and the MQI emulator (tests/mqemu; NOT IBM MQ): all fine through a CCDT group with
credentials and nothing taken, missing queues named with where they were looked for, refused
credentials and a listener that does not answer in words, and a CCDT only on the load hosts."""

from __future__ import annotations

import pytest

from drivers.base import Unchecked
from drivers.mq.preflight import MqPreflight
from drivers.mq.settings import MqSettings
from tests.unit.mqemu_helpers import (
    PASSWORD,
    SETTINGS,
    USER,
    connections,
    depth,
    endpoint,
    seed,
    write_ccdt,
)

pytestmark = pytest.mark.timeout(90)
GROUP = "*UC01QM"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ("MQCCDTURL", "SURGE_MQ_USER", "SURGE_MQ_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def check(ibmmq, endpoints: list[str], queues: list[str], settings: MqSettings = SETTINGS):
    """Run the check with the real ``ibmmq`` as the MQI library."""
    MqPreflight(endpoints, queues, settings, load=lambda: ibmmq).check()


def test_all_fine_through_the_ccdt_group_with_credentials_and_nothing_taken(emulated_ibmmq,
                                                                          qmgrs, tmp_path):
    queues = ["DEFINE QLOCAL('perf1')", "DEFINE QLOCAL('perf2')"]
    first, second = (qmgrs.start(name, USER, PASSWORD, queues) for name in ("UC01QM01",
                                                                             "UC01QM02"))
    seed(emulated_ibmmq, first, "perf1", 2)
    url = write_ccdt(tmp_path / "UC01.json", [("PERF.APP.CHL", "UC01QM", first, 0),
                                             ("PERF.APP.CHL", "UC01QM", second, 0)])
    settings = MqSettings(user=USER, password=PASSWORD, ccdt_url=url)
    check(emulated_ibmmq, [GROUP, GROUP], ["perf1", "perf2"], settings)
    assert depth(first, "perf1") == 2 and depth(first, "perf2") == 0  # nothing put or got
    assert connections(first) == connections(second) == []  # let go of
    with pytest.raises(ConnectionError, match="MQRC_NOT_AUTHORIZED 2035"):
        check(emulated_ibmmq, [GROUP], ["perf1"], MqSettings(user=USER, password="x",
                                                             ccdt_url=url))


def test_it_learns_what_the_queue_manager_is_and_that_it_is_an_emulator(emulated_ibmmq,
                                                                         qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    probe = MqPreflight([endpoint(qm1)], ["perf"], SETTINGS, load=lambda: emulated_ibmmq)
    assert probe.identify() is None  # not asked yet
    probe.check()
    assert probe.identify() == {"product": "IBM MQ", "version": "9.4.0.0", "emulated": True,
                                "description": "EMULATED queue manager for tests, NOT IBM MQ"}


def test_each_queue_manager_of_its_own_channel_is_checked(emulated_ibmmq, qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    qm2 = qmgrs.start("QM2", USER, PASSWORD)
    with pytest.raises(LookupError) as missing:
        check(emulated_ibmmq, [endpoint(qm1), endpoint(qm2)], ["perf"])
    assert str(missing.value) == f"perf (at {endpoint(qm2)})"  # QM1 has it, QM2 does not


def test_missing_queues_are_named_with_where_they_were_looked_for(emulated_ibmmq, qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf1')"])
    with pytest.raises(LookupError) as missing:
        check(emulated_ibmmq, [endpoint(qm1)], ["perf1", "perf2", "perf3"])
    assert str(missing.value) == f"perf2, perf3 (at {endpoint(qm1)})"
    assert connections(qm1) == []  # the connection is let go of all the same


def test_refused_credentials_are_a_connection_error_in_words_without_the_password(
        emulated_ibmmq, qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    target = endpoint(qm1)
    check(emulated_ibmmq, [target], ["perf"])  # the right ones pass
    wrong = MqSettings(user=USER, password="wrong-secret", channel="PERF.APP.CHL")
    with pytest.raises(ConnectionError) as refused:
        check(emulated_ibmmq, [target], ["perf"], wrong)
    text = str(refused.value)
    assert text.startswith(f"{target}: the queue manager refused the user and password")
    assert "MQRC_NOT_AUTHORIZED 2035" in text and "wrong-secret" not in text


def test_a_listener_that_does_not_answer_is_a_connection_error_in_words(emulated_ibmmq, qmgrs):
    qm1 = qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    target = endpoint(qm1)
    qm1.stop()
    with pytest.raises(ConnectionError, match=rf"^{target.replace('(', '.').replace(')', '.')}"
                                              r": nothing answers at the connection name .*"
                                              r"MQRC_HOST_NOT_AVAILABLE 2538"):
        check(emulated_ibmmq, [target], ["perf"])


def test_a_ccdt_file_only_on_the_load_hosts_is_not_pretended_checked(emulated_ibmmq, qmgrs,
                                                                    tmp_path):
    member = qmgrs.start("UC01QM01", USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
    path = tmp_path / "UC01.json"
    absent = MqSettings(user=USER, password=PASSWORD, ccdt_url=f"file://{path}")
    with pytest.raises(Unchecked, match="CCDT .*UC01.json is not on the controller's machine"):
        check(emulated_ibmmq, [GROUP], ["perf"], absent)
    write_ccdt(path, [("PERF.APP.CHL", "UC01QM", member, 0)])
    check(emulated_ibmmq, [GROUP], ["perf"], absent)  # there: checked, and it really looks
    with pytest.raises(LookupError, match=r"nope \(at \*UC01QM\)"):
        check(emulated_ibmmq, [GROUP], ["perf", "nope"], absent)
    elsewhere = MqSettings(user=USER, password=PASSWORD, channel="PERF.APP.CHL",
                           ccdt_url=f"file://{tmp_path}/other.json")
    check(emulated_ibmmq, [endpoint(member)], ["perf"], elsewhere)  # its own channel: no CCDT
