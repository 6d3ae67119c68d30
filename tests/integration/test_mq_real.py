"""The MQ driver against a real queue manager through IBM's library (``ibmmq`` or ``pymqi``).

Skipped unless the MQ client and a queue manager are there. To run it, for example against
IBM's developer container (``icr.io/ibm-messaging/mq``, queue manager QM1, channel
DEV.APP.SVRCONN, queues DEV.QUEUE.1 to DEV.QUEUE.3, user ``app``)::

    pip install 'surge[mq]'                       # ibmmq (or pymqi) builds against the client
    export MQ_INSTALLATION_PATH=/opt/mqm          # the MQ (redistributable) client
    export SURGE_MQ_QMGR=QM1                      # or *GROUP together with MQCCDTURL
    export SURGE_MQ_CHANNEL=DEV.APP.SVRCONN SURGE_MQ_CONNAME='localhost(1414)'
    # or instead of channel and conname:  export MQCCDTURL=file:///path/to/ccdt.json
    export SURGE_MQ_USER=app SURGE_MQ_PASSWORD=...            # if the channel checks them
    export SURGE_MQ_QUEUE=DEV.QUEUE.1             # put/get (default DEV.QUEUE.1)
    export SURGE_MQ_REQUEST_QUEUE=DEV.QUEUE.2 SURGE_MQ_REPLY_QUEUE=DEV.QUEUE.3
    # and, for the way document 000's applications connect (CCDT, QM group, reconnect, MQCSP
    # from the driver's settings rather than the environment):
    export SURGE_MQ_CCDT_URL=file:///path/to/ccdt.json  # its entries name the group as queueManager
    export SURGE_MQ_GROUP='*QM1'                  # default '*' + SURGE_MQ_QMGR
    pytest --noconftest tests/integration/test_mq_real.py

``--noconftest``: the directory's conftest skips everything where RabbitMQ is not installed.
The queues are emptied first; whatever is on them is lost.
"""

from __future__ import annotations

import os
import time

import pytest

from drivers.message import PayloadBuilder
from drivers.mq.driver import MqClientMissing, MqDriver, load_mqi
from drivers.mq.settings import MqSettings
from drivers.protocol import Destination
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole

QMGR = os.environ.get("SURGE_MQ_QMGR", "")
CHANNEL = os.environ.get("SURGE_MQ_CHANNEL", "")
CONNAME = os.environ.get("SURGE_MQ_CONNAME", "")
QUEUE = os.environ.get("SURGE_MQ_QUEUE", "DEV.QUEUE.1")
REQUESTS = os.environ.get("SURGE_MQ_REQUEST_QUEUE", "DEV.QUEUE.2")
REPLIES = os.environ.get("SURGE_MQ_REPLY_QUEUE", "DEV.QUEUE.3")

if not os.environ.get("MQ_INSTALLATION_PATH") or not QMGR:
    pytest.skip("needs the IBM MQ client (MQ_INSTALLATION_PATH) and a queue manager "
                "(SURGE_MQ_QMGR); see this file's docstring", allow_module_level=True)
if not (CHANNEL and CONNAME) and not os.environ.get("MQCCDTURL"):
    pytest.skip("needs SURGE_MQ_CHANNEL and SURGE_MQ_CONNAME, or MQCCDTURL",
                allow_module_level=True)
try:
    MQI = load_mqi()
except MqClientMissing as missing:
    pytest.skip(str(missing), allow_module_level=True)

ENDPOINT = f"mq://{CONNAME}/{QMGR}?channel={CHANNEL}" if CHANNEL and CONNAME else QMGR
CCDT_URL = os.environ.get("SURGE_MQ_CCDT_URL", "")
GROUP = os.environ.get("SURGE_MQ_GROUP", "") or f"*{QMGR.lstrip('*')}"


def driver(queue: str, settings: MqSettings | None = None, **fields) -> MqDriver:
    mq = MqDriver(Destination(endpoints=(ENDPOINT,), queue=queue, **fields), Recorder(),
                  settings or MqSettings(), mqi=MQI)
    mq.start()
    return mq


def empty(*queues: str) -> None:
    """Get whatever is left on ``queues`` from earlier runs."""
    mq = MqDriver(Destination(endpoints=(ENDPOINT,), queue=queues[0]), Recorder(), mqi=MQI)
    qm = mq.connect(ENDPOINT, "surge.test")
    C = MQI.CMQC
    try:
        for name in queues:
            queue = MQI.Queue(qm, name, C.MQOO_INPUT_SHARED)
            while True:
                try:
                    queue.get(None, MQI.MD(), MQI.GMO(Options=C.MQGMO_NO_WAIT
                                                      | C.MQGMO_NO_SYNCPOINT))
                except MQI.MQMIError as error:
                    if error.reason == C.MQRC_NO_MSG_AVAILABLE:
                        break
                    raise
            queue.close()
    finally:
        qm.disconnect()


def until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_put_and_get_through_the_real_library():
    empty(QUEUE)
    mq = driver(QUEUE, manual_ack=True, persistent=True, confirms=True)
    recorder = mq.recorder
    mq.add_receiver(ReceiverRole(recorder, 1), ENDPOINT)
    mq.add_sender(mq.call(lambda: SenderRole(1, 100, PayloadBuilder(2048), recorder, limit=50)),
                  ENDPOINT)
    until(lambda: mq.call(lambda: recorder.received) == 50)
    mq.stop(10)
    assert (recorder.sent, recorder.confirmed, recorder.received, recorder.errors,
            recorder.tracker.duplicates, recorder.connections) == (50, 50, 50, 0, 0, 0)


def test_request_reply_through_the_real_library():
    empty(REQUESTS, REPLIES)
    mq = driver(REQUESTS, MqSettings(reply_queue=REPLIES), unit_of_work=True, reply_size=2048)
    recorder = mq.recorder
    mq.add_receiver(ResponderRole(recorder, 1), ENDPOINT)
    mq.add_sender(mq.call(lambda: RequesterRole(2, 0, PayloadBuilder(2048), recorder,
                                                in_flight=2, limit=20)), ENDPOINT)
    until(lambda: mq.call(lambda: recorder.received) == 20)
    mq.stop(10)
    assert (recorder.sent, recorder.served, recorder.received, recorder.unmatched,
            recorder.timeouts, recorder.errors) == (20, 20, 20, 0, 0, 0)


@pytest.mark.skipif(not CCDT_URL, reason="needs SURGE_MQ_CCDT_URL (a CCDT whose entries name "
                                         "the queue manager group; see the docstring)")
def test_through_the_ccdt_and_the_group_reconnectable_with_mqcsp_from_the_settings(
        monkeypatch):
    empty(QUEUE)  # with the environment's credentials, as the other tests
    user, password = os.environ.get("SURGE_MQ_USER", ""), os.environ.get("SURGE_MQ_PASSWORD", "")
    monkeypatch.delenv("SURGE_MQ_USER", raising=False)  # only the settings carry them now
    monkeypatch.delenv("SURGE_MQ_PASSWORD", raising=False)
    monkeypatch.delenv("MQCCDTURL", raising=False)
    settings = MqSettings(queue_manager=GROUP, ccdt_url=CCDT_URL, reconnect="yes", user=user,
                          password=password)
    mq = MqDriver(Destination(endpoints=(GROUP,), queue=QUEUE, manual_ack=True), Recorder(),
                  settings, mqi=MQI)
    mq.start()
    recorder = mq.recorder
    mq.add_receiver(ReceiverRole(recorder, 1), GROUP)
    mq.add_sender(mq.call(lambda: SenderRole(1, 100, PayloadBuilder(2048), recorder, limit=30)),
                  GROUP)
    until(lambda: mq.call(lambda: recorder.received) == 30)
    mq.stop(10)
    assert (recorder.sent, recorder.received, recorder.errors, recorder.tracker.duplicates) \
        == (30, 30, 0, 0)
