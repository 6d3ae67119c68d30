"""Routing: the broker's rules for direct, fanout, topic and headers exchanges as surge models
them, the routing key each message takes, the publishes of several keys in one batch, and the
accounting of copies per subscription."""

import pytest

from drivers import protocol
from drivers.accounting import SequenceTracker
from drivers.amqp.frames import FrameEncoder, Templates
from drivers.routing import KeyPicker
from orchestrator.run.accounting import Routing, account
from orchestrator.specs.routing import headers_match, topic_matches
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec


@pytest.mark.parametrize("pattern, key, matches", [
    ("a.b", "a.b", True), ("a.b", "a.c", False), ("*.b", "a.b", True), ("*", "a.b", False),
    ("#", "", True), ("#", "a.b.c", True), ("a.#", "a", True), ("a.#", "a.b.c", True),
    ("#.c", "a.b.c", True), ("a.#.c", "a.c", True), ("a.#.c", "a.x.y.c", True),
    ("a.*.c", "a.c", False), ("*.*", "a.b", True), ("a.#", "b.a", False),
])
def test_topic_patterns_match_as_the_broker_does(pattern, key, matches):
    assert topic_matches(pattern, key) is matches


def test_headers_bindings_match_all_or_any():
    assert headers_match({"x-match": "all", "a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3})
    assert not headers_match({"x-match": "all", "a": 1, "b": 2}, {"a": 1})
    assert headers_match({"x-match": "any", "a": 1, "b": 2}, {"a": 1})
    assert not headers_match({"a": 1}, {"a": 2})


TOPOLOGY = TopologySpec.model_validate({
    "name": "t", "members": 2, "start": 2,
    "queues": [{"name": "sub-%d", "count": 3}, {"name": "eu"}, {"name": "all"}],
    "exchanges": [{"name": "fan", "type": "fanout"}, {"name": "orders", "type": "topic"},
                  {"name": "audit", "type": "fanout"}, {"name": "direct"}],
    "bindings": [{"exchange": "fan", "queue": "sub-%d"},
                 {"exchange": "orders", "queue": "eu", "routing_key": "eu.#"},
                 {"exchange": "orders", "to_exchange": "audit", "routing_key": "#"},
                 {"exchange": "audit", "queue": "all"},
                 {"exchange": "audit", "to_exchange": "orders"},  # a cycle: followed once
                 {"exchange": "direct", "queue": "sub-2", "routing_key": "two"}]})


@pytest.mark.parametrize("exchange, key, queues", [
    ("", "eu", {"eu"}), ("fan", "anything", {"sub-1", "sub-2", "sub-3"}),
    ("orders", "eu.new", {"eu", "all"}), ("orders", "us.new", {"all"}),
    ("direct", "two", {"sub-2"}), ("direct", "three", set()), ("missing", "x", set()),
])
def test_a_key_reaches_the_queues_its_bindings_say(exchange, key, queues):
    assert TOPOLOGY.routes(exchange, key) == queues


def test_bindings_must_name_declared_exchanges_and_queues():
    def problems(*bindings):
        with pytest.raises(ValueError) as bad:
            TopologySpec.model_validate({"name": "t", "queues": [{"name": "q"}],
                                         "exchanges": [{"name": "x"}], "bindings": list(bindings)})
        return str(bad.value)

    text = problems({"exchange": "y", "queue": "q"}, {"exchange": "x", "queue": "r"})
    assert "bindings.0.exchange: 'y' is not an exchange of this topology (exchanges: x)" in text
    assert "bindings.1.queue: 'r' is not a queue of this topology (queues: q)" in text
    assert "give either queue or to_exchange" in problems({"exchange": "x"})


def scenario(**workload) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "s", "topology": "t.yaml", "plan": ["10:1s"],
        "workload": {"queue": "sub-%d", "senders": 2, "receivers": 3, **workload}})


def test_routing_keys_need_an_exchange_and_a_pattern_needs_a_count():
    with pytest.raises(ValueError, match="routing_key: routing keys need an exchange"):
        scenario(routing_key="k")
    with pytest.raises(ValueError, match="key_count: a key_count above 1 goes with"):
        scenario(exchange="fan", routing_keys=["a", "b"], key_count=3)
    assert scenario(exchange="fan", routing_keys=["k-%d"], key_count=3).workload.keys == \
        ["k-1", "k-2", "k-3"]


def test_each_message_takes_a_key_that_depends_only_on_its_producer_and_number():
    assert KeyPicker(3, "sequential").picks(1, 5, 4) == [2, 0, 1, 2]
    uniform, zipf = KeyPicker(4, "random"), KeyPicker(4, "zipf", 1.0)
    assert uniform.picks(7, 0, 50) == KeyPicker(4, "random").picks(7, 0, 50)
    assert uniform.picks(7, 0, 50) != uniform.picks(8, 0, 50)
    counts = [uniform.picks(1, 0, 40_000).count(k) for k in range(4)]
    assert all(9_500 < c < 10_500 for c in counts), counts
    counts = [zipf.picks(1, 0, 40_000).count(k) for k in range(4)]
    # weights 1, 1/2, 1/3, 1/4 of 25/12: 48 %, 24 %, 16 %, 12 %
    assert [round(c / 400) for c in counts] == [48, 24, 16, 12], counts
    assert KeyPicker(1, "random").fixed and KeyPicker(1).pick(3, 99) == 0


def test_a_mixed_batch_is_the_single_publishes_of_each_message_joined():
    sizes = [100, 300_000]  # the second one in three body frames
    fillers = [bytes(range(72)), bytes(300_000 - 28)]
    targets = [("orders", "a"), ("orders", "bb"), ("", "q")]
    templates = Templates(1, 131072, targets, sizes, fillers, True, None, True)
    encoders = [FrameEncoder(1, key, size, True, 131072, exchange, filler, None, True)
                for exchange, key in targets for size, filler in zip(sizes, fillers)]
    assert len(templates) == 6
    picks = [0, 3, 1, 2, 5, 4, 0]
    mixed = templates.mixed(picks, 3, 10, 123, (0, 40, 10.0))
    singles = b"".join(encoders[k].batch(1, 3, 10 + i, 123, (0, 40 - 10 * i, 0.0))
                       for i, k in enumerate(picks))
    assert bytes(mixed) == singles
    assert b"\x06orders\x02bb" in singles
    assert bytes(templates.encoder(3).batch(2, 3, 7, 5)) == bytes(encoders[3].batch(2, 3, 7, 5))


def report(sent: dict[int, int], groups: dict[str, dict[int, list[int]]]) -> protocol.Accounting:
    bitmaps = {}
    for group, seen in groups.items():
        tracker = SequenceTracker()
        for producer, seqs in seen.items():
            for seq in seqs:
                tracker.record(producer, seq)
        bitmaps[group] = tracker.export()
    return protocol.Accounting(sent, bitmaps)


def test_fanout_copies_are_accounted_per_subscription():
    spec = scenario(exchange="fan")
    routing = Routing.of(spec, TOPOLOGY.routes, ["sub-1", "sub-2", "sub-3"])
    every = list(range(10))
    reports = [report({1: 10}, {"sub-1": {1: every}, "sub-2": {1: every[:-1]}}),
               report({2: 10}, {"sub-1": {2: every}, "sub-2": {2: every},
                                "sub-3": {1: every, 2: every}})]
    done = account(reports, [protocol.Snapshot(0.0)] * 2, spec, None, routing=routing,
                   per_queue={"sub-1": 0, "sub-2": 0, "sub-3": 0})
    books = done.result
    assert (books.published, books.sent, books.received, books.lost) == (20, 60, 59, 1)
    assert books.subscriptions["sub-2"] == {"routed": 20, "received": 19, "duplicates": 0,
                                            "queued": 0, "lost": 1}
    assert done.missing == {1: 1, 2: 0} and not books.balanced
    assert books.explain().startswith("published 20 messages as 60 copies to subscriptions: "
                                      "sent 60 = received 59 + queued 0 + lost 1")


def test_keys_that_reach_some_queues_expect_exactly_their_messages_there():
    spec = scenario(exchange="direct", routing_keys=["two", "three"], key_order="sequential")
    routing = Routing.of(spec, TOPOLOGY.routes, ["sub-1", "sub-2", "sub-3"])
    # sequential: even numbers take "two" (to sub-2), odd ones "three" (nowhere)
    reports = [report({1: 10}, {"sub-2": {1: [0, 2, 4, 6, 8]}})]
    done = account(reports, [protocol.Snapshot(0.0)], spec, None, routing=routing,
                   per_queue={"sub-2": 0})
    assert (done.result.published, done.result.sent, done.result.received) == (10, 5, 5)
    assert done.result.balanced and done.extras["unroutable"] == 5
    stray = account([report({1: 10}, {"sub-2": {1: [0, 1]}})], [protocol.Snapshot(0.0)], spec,
                    None, routing=routing, per_queue={"sub-2": 0})
    assert stray.extras["misrouted"] == 1 and not stray.result.balanced


def test_a_rabbitmq_field_on_an_mq_topology_is_refused_naming_it():
    from pathlib import Path

    from orchestrator.errors import SpecError
    from orchestrator.specs.loader import load_scenario
    root = Path(__file__).resolve().parents[2]
    with pytest.raises(SpecError) as refused:
        load_scenario(root / "scenarios" / "mq-uniform-cluster-scaling.yaml",
                      ["workload.heartbeat=10s", "workload.frame_max=8192",
                       "workload.message.mandatory=true",
                       "workload.message.properties.priority=4", "workload.global_qos=true"])
    text = str(refused.value)
    assert "workload.heartbeat: a RabbitMQ field: topology" in text
    for field in ("frame_max", "message.mandatory", "message.properties", "global_qos"):
        assert f"workload.{field}: a RabbitMQ field" in text


def test_a_lost_agent_under_fanout_leaves_an_unknown_never_a_loss():
    from orchestrator.run.agentloss import LostAgent
    spec = scenario(exchange="fan")
    routing = Routing.of(spec, TOPOLOGY.routes, ["sub-1", "sub-2", "sub-3"])
    # producer 1 reports; the lost agent hosted producer 2 (10 sent by its last reading) and
    # sub-3's receiver (20 copies received by then); sub-1 and sub-2 got producer 2's 10 each
    live = report({1: 10}, {"sub-1": {1: range(10), 2: range(10)},
                            "sub-2": {1: range(10), 2: range(10)}})
    gone = LostAgent(1, "127.0.0.1", "gone", 5.0, 3.0,
                     protocol.Snapshot(0.0, sent=10, received=20), 1, 1)
    done = account([live], [protocol.Snapshot(0.0)], spec, None, [gone], routing,
                   {"sub-1": 0, "sub-2": 0, "sub-3": 0})
    books = done.result
    assert (books.published, books.sent, books.received) == (20, 60, 60)
    assert books.unknown == 0 and books.lost is None and not books.balanced
    assert books.subscriptions["sub-3"] == {"routed": 10, "received": 0, "duplicates": 0,
                                            "queued": 0, "unknown": 10}
    assert done.missing == {}  # sub-3's receiver went with the agent: nothing said missing


def test_each_reader_of_a_stream_is_a_subscription_and_rereads_are_no_duplicates():
    spec = scenario(queue="events", receivers=2, stream_offset="first")
    routing = Routing.of(spec, TOPOLOGY.routes, ["events"], each_reader=True)
    assert routing.subscriptions == {"events~1": "events", "events~2": "events"}
    assert routing.copies_each() == 2
    reader = SequenceTracker(stream=True)
    assert [reader.record(1, seq) for seq in (0, 1, 0, 1, 2)] == [True, True, False, False, True]
    assert (reader.received, reader.duplicates, reader.rereads) == (3, 0, 2)
    every = range(5)
    done = account([report({1: 5}, {"events~1": {1: every}, "events~2": {1: every}})],
                   [protocol.Snapshot(0.0, rereads=5)], spec, None, routing=routing,
                   per_queue={"events": 0})  # a stream's length is not reported
    books = done.result
    assert (books.published, books.sent, books.received, books.still_queued, books.lost) == \
        (5, 10, 10, 0, 0)
    assert books.balanced and done.extras["rereads"] == 5
    behind = account([report({1: 5}, {"events~1": {1: every}, "events~2": {1: range(3)}})],
                     [protocol.Snapshot(0.0)], spec, None, routing=routing,
                     per_queue={"events": 0})
    assert behind.result.subscriptions["events~2"] == {"routed": 5, "received": 3,
                                                       "duplicates": 0}
    assert behind.result.still_queued is None and behind.result.lost is None  # unknown
