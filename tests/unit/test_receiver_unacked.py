"""A receiver's count of the deliveries it holds unacknowledged (the recorder's ``held`` and
``unacked``, which the run's queue depth adds to the ready messages): up with each delivery,
down with each ack, and back to 0 when its channel goes (the broker requeues them). The link
runs on stand-ins for its driver, loop and channel: the subject is the bookkeeping."""

from types import SimpleNamespace

from drivers import protocol
from drivers.amqp.receiver import ReceiverLink
from drivers.header import encode
from drivers.workers import ReceiverRole, Recorder


class Channel:
    def __init__(self):
        self.acks: list[tuple[int, bool]] = []
        self.is_open = True
        self.channel_number = 1

    def basic_ack(self, tag, multiple=False):
        self.acks.append((tag, multiple))


class Loop:
    def __init__(self):
        self.later: list = []

    def call_later(self, delay, callback):
        self.later.append((delay, callback))
        return object()


def link(ack_every: int = 3, delay_s: float = 0.0) -> tuple[ReceiverLink, Recorder, Channel]:
    recorder = Recorder()
    driver = SimpleNamespace(
        destination=protocol.Destination(endpoints=("amqp://m0",), queue="q", ack_every=ack_every),
        recorder=recorder, ioloop=Loop(), consumer_delay_s=delay_s, receivers_paused=False,
        consume_arguments={}, fast_path_on=lambda connection: False)
    receiver = ReceiverLink(driver, ReceiverRole(recorder), "amqp://m0", "q")
    channel = Channel()
    receiver.channel = channel
    return receiver, recorder, channel


def deliver(receiver: ReceiverLink, tags: range) -> None:
    for tag in tags:
        receiver._arrived(encode(1, tag, 0), 0, tag, False)


def test_handled_deliveries_count_until_their_batched_ack_goes():
    receiver, recorder, channel = link(ack_every=3)
    deliver(receiver, range(1, 6))
    assert channel.acks == [(3, True)]
    assert (recorder.received, recorder.unacked) == (5, 2)
    receiver.flush()  # the 100 ms timer
    assert channel.acks == [(3, True), (5, True)] and recorder.unacked == 0
    assert recorder.snapshot().unacked == 0


def test_a_closed_channel_takes_its_unacknowledged_and_held_deliveries_with_it():
    receiver, recorder, _ = link(ack_every=10)
    deliver(receiver, range(1, 5))
    assert recorder.unacked == 4
    receiver.driver.consumer_delay_s = 0.05  # slowed: the next ones wait, held
    deliver(receiver, range(5, 8))
    assert (recorder.held, recorder.unacked) == (3, 4)
    assert (recorder.snapshot().held, recorder.snapshot().unacked) == (3, 4)
    receiver._channel_closed(receiver.channel, "connection reset")
    assert (recorder.held, recorder.unacked) == (0, 0)  # back in the queue: ready again


def test_two_receivers_of_one_agent_add_up_and_each_forgets_only_its_own():
    first, recorder, _ = link(ack_every=10)
    second = ReceiverLink(first.driver, ReceiverRole(recorder), "amqp://m0", "q")
    second.channel = Channel()
    deliver(first, range(1, 4))
    deliver(second, range(1, 3))
    assert recorder.unacked == 5
    second._connection_closed(None, "lost")
    assert recorder.unacked == 3
    first.flush()
    assert recorder.unacked == 0
