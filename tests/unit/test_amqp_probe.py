"""The RabbitMQ preflight (:class:`drivers.amqp.probe.QueueDepthProbe`) over connections that
live in memory: every endpoint is connected to at once, on one connection for the whole check,
the first endpoint's error in their order is the one said, and no connection is left open."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pika.exceptions
import pytest

from drivers.amqp import probe as amqp_probe
from drivers.base import MessageTooLarge

ENDPOINTS = ["amqp://a:5672", "amqp://b:5672", "amqp://c:5672"]


class Broker:
    """What the fake connections reach: which hosts refuse connections or large messages, and
    every connection made. ``together``: each connection waits until that many are being made
    at once (a barrier that breaks, failing the test, if they are made one after another)."""

    def __init__(self, refuse=(), limit: dict[str, int] | None = None, together: int = 0,
                 queues=("q",)):
        self.refuse, self.limit, self.queues = set(refuse), limit or {}, set(queues)
        self.barrier = threading.Barrier(together, timeout=5) if together else None
        self.connections: list[Connection] = []
        self.lock = threading.Lock()

    def connect(self, parameters) -> Connection:
        if self.barrier:
            self.barrier.wait()
        if parameters.host in self.refuse:
            raise pika.exceptions.AMQPConnectionError(ConnectionRefusedError("refused"))
        connection = Connection(self, parameters.host)
        with self.lock:
            self.connections.append(connection)
        return connection


class Connection:
    def __init__(self, broker: Broker, host: str):
        self.broker, self.host, self.is_open = broker, host, True

    def channel(self):
        return Channel(self)

    def close(self) -> None:
        self.is_open = False


class Channel:
    def __init__(self, connection: Connection):
        self.connection, self.is_open = connection, True

    def queue_declare(self, queue, passive=False):
        if queue not in self.connection.broker.queues:
            self.is_open = False
            raise pika.exceptions.ChannelClosedByBroker(404, "NOT_FOUND")
        return SimpleNamespace(method=SimpleNamespace(message_count=7))

    def confirm_delivery(self) -> None:
        pass

    def close(self) -> None:
        self.is_open = False

    def basic_publish(self, exchange, key, body) -> None:
        limit = self.connection.broker.limit.get(self.connection.host)
        if limit is not None and len(body) > limit:
            raise pika.exceptions.ChannelClosedByBroker(
                406, f"PRECONDITION_FAILED - message size {len(body)} is larger than "
                     f"configured max size {limit}")


@pytest.fixture
def broker(monkeypatch):
    def make(**options) -> Broker:
        made = Broker(**options)
        monkeypatch.setattr(amqp_probe.pika, "BlockingConnection", made.connect)
        return made
    return make


def test_every_endpoint_is_checked_at_once_on_one_connection_each(broker):
    fake = broker(together=3)
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"])
    probe.check()
    assert sorted(c.host for c in fake.connections) == ["a", "b", "c"]  # no fourth to read
    fake.barrier = threading.Barrier(3, timeout=5)
    probe.check_size(4096)  # on the connections the check made
    assert len(fake.connections) == 3
    assert [c.host for c in fake.connections if c.is_open] == ["a"]  # kept for the reads
    fake.barrier = None
    assert probe.read()[0] == {"q": 7} and len(fake.connections) == 3
    probe.close()
    assert not any(c.is_open for c in fake.connections)


def test_what_the_check_kept_is_closed_with_the_probe(broker):
    fake = broker()
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"])
    probe.check()
    assert all(c.is_open for c in fake.connections)
    probe.close()
    assert len(fake.connections) == 3 and not any(c.is_open for c in fake.connections)


def test_the_first_endpoint_that_refuses_is_named_and_nothing_is_left_open(broker):
    fake = broker(refuse={"b", "c"}, together=3)
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"])
    with pytest.raises(ConnectionError, match=r"^amqp://b:5672: "):
        probe.check()
    assert [c.host for c in fake.connections] == ["a"] and not fake.connections[0].is_open


def test_missing_queues_are_listed(broker):
    broker()
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS, ["q", "gone", "lost"])
    with pytest.raises(LookupError, match="^gone, lost$"):
        probe.check()
    probe.close()


def test_every_endpoint_takes_the_largest_message_at_once(broker):
    fake = broker(together=3)
    amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"]).check_size(4096)
    assert len(fake.connections) == 3 and not any(c.is_open for c in fake.connections)


def test_the_first_endpoint_that_refuses_the_size_is_named_with_its_limit(broker):
    fake = broker(limit={"b": 1024, "c": 2048}, refuse={"a"}, together=3)
    with pytest.raises(ConnectionError, match=r"^amqp://a:5672: "):
        amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"]).check_size(4096)
    fake.refuse, fake.barrier = set(), threading.Barrier(3, timeout=5)
    with pytest.raises(MessageTooLarge) as refused:
        amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"]).check_size(4096)
    assert (refused.value.endpoint, refused.value.limit) == ("amqp://b:5672", 1024)
    assert not any(c.is_open for c in fake.connections)


def test_one_endpoint_needs_no_thread_and_one_connection(broker):
    fake = broker()
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS[:1], ["q"])
    probe.check()
    probe.check_size(10)
    probe.close()
    assert [(c.host, c.is_open) for c in fake.connections] == [("a", False)]


def test_a_size_refused_on_a_kept_connection_is_named_and_all_is_closed(broker):
    fake = broker(limit={"b": 1024})
    probe = amqp_probe.QueueDepthProbe(ENDPOINTS, ["q"])
    probe.check()
    with pytest.raises(MessageTooLarge) as refused:
        probe.check_size(4096)
    assert refused.value.endpoint == "amqp://b:5672" and len(fake.connections) == 3
    probe.close()
    assert not any(c.is_open for c in fake.connections)
