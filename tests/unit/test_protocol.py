"""The controller-agent protocol: typed messages, strict decoding, a version both sides check."""

import json

import pytest

from drivers import protocol
from orchestrator.agents.client import read_hello
from orchestrator.errors import AgentError


def test_messages_survive_the_wire_unchanged():
    config = protocol.Configure(
        broker="ibmmq", pattern="request-reply", message=protocol.MessageShape(sizes=(2048,)),
        destination=protocol.Destination(endpoints=("mq://h(1414)/QM1",), queue="REQUEST"),
        settings={"channel": "PERF.APP.CHL"}, in_flight=4,
        senders=[protocol.SenderConfig(1, 10.0, "mq://h(1414)/QM1", ["A", "B"], limit=5)],
        receivers=[protocol.ReceiverConfig(1, "mq://h(1414)/QM1", "REQUEST")])
    assert protocol.decode(protocol.Configure, json.loads(protocol.dumps(config))) == config
    accounting = protocol.Accounting({1: 3, 7: 0}, {"": {1: b"\x07", 7: b""}, "q-2": {}})
    assert protocol.decode(protocol.Accounting,
                           json.loads(protocol.dumps(accounting))) == accounting


@pytest.mark.parametrize("kind, data, problem", [
    (protocol.Rate, {"rate_per_sender": 1, "actve": 2}, "unknown field 'actve'"),
    (protocol.Rate, {}, "missing field 'rate_per_sender'"),
    (protocol.Rate, {"rate_per_sender": "fast"}, "Rate.rate_per_sender: expected float"),
    (protocol.Move, {"endpoint": "x", "senders": [1, "2"]}, r"Move.senders\[1\]: expected int"),
    (protocol.Configure, {"broker": "rabbitmq", "pattern": "p", "message": {},
                          "destination": {"endpoints": [], "queue": "q", "prefetch": True}},
     "Configure.destination.prefetch: expected int"),
])
def test_a_message_that_does_not_match_is_refused_naming_the_field(kind, data, problem):
    with pytest.raises(protocol.ProtocolError, match=problem):
        protocol.decode(kind, data)


def test_an_agent_of_another_protocol_version_is_refused_at_hello():
    hello = protocol.Hello(4242, 7, protocol.PROTOCOL_VERSION)
    assert read_hello(protocol.dumps(hello).decode(), "agent 0") == hello
    with pytest.raises(AgentError, match="speaks agent protocol 1, this controller"):
        read_hello(json.dumps({"port": 4242, "pid": 7}), "agent 0 on loadhost")
    with pytest.raises(AgentError, match="did not start: Traceback"):
        read_hello("Traceback (most recent call last):", "agent 0")
