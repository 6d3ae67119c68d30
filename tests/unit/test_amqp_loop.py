"""surge's event loop (``drivers.amqp.loop``): timers in order and cancellable on a fake clock,
callbacks from other threads, descriptors on real sockets, direct readers, and pika's own
connection machinery running on it."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport
from pika.adapters.utils.selector_ioloop_adapter import SelectorIOServicesAdapter

from drivers.amqp import loop as loop_module
from drivers.amqp.loop import BUSY_TURNS, COMPACT_AFTER, Loop
from drivers.amqp.wire import install_direct_io


class FakeClock:
    """``time.monotonic`` as the loop reads it, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """The fake clock, read by the pure core and the compiled one alike."""
    fake = FakeClock()
    monkeypatch.setattr(loop_module, "time", fake)
    if loop_module._compiled is not None:
        loop_module._compiled.use_clocks(monotonic=fake.monotonic)
    yield fake
    if loop_module._compiled is not None:
        loop_module._compiled.use_clocks()


@pytest.fixture
def loop():
    made = Loop()
    yield made
    made.close()


def run_on_thread(loop: Loop) -> threading.Thread:
    thread = threading.Thread(target=loop.start, daemon=True)
    thread.start()
    return thread


def test_timers_run_in_deadline_order_once_due_and_not_before(loop, clock):
    ran = []
    loop.call_later(0.3, lambda: ran.append("c"))
    loop.call_later(0.1, lambda: ran.append("a"))
    loop.call_later(0.1, lambda: ran.append("b"))  # same deadline: in the order asked
    clock.now += 0.05
    loop._turn()
    assert ran == []
    clock.now += 0.1
    loop._turn()
    assert ran == ["a", "b"]
    clock.now += 1
    loop._turn()
    assert ran == ["a", "b", "c"]


def test_a_turn_waits_no_longer_than_the_next_timer(loop, clock):
    assert loop._wait_s() == loop_module.MAX_WAIT_S
    loop.call_later(0.25, lambda: None)
    assert loop._wait_s() == pytest.approx(0.25)
    clock.now += 1
    assert loop._wait_s() == 0.0  # overdue
    loop.add_callback(lambda: None)
    assert loop._wait_s() == 0.0


def test_the_core_that_runs_is_the_one_compiled_load_picked():
    expected = loop_module.LoopCore if loop_module._compiled is None \
        else loop_module._compiled.LoopCore
    assert issubclass(Loop, expected)


def test_a_cancelled_timer_does_not_run_and_cancelling_twice_is_harmless(loop, clock):
    ran = []
    first = loop.call_later(0.1, lambda: ran.append("first"))
    loop.call_later(0.1, lambda: loop.remove_timeout(later))  # one due timer cancels another
    later = loop.call_later(0.1, lambda: ran.append("later"))
    loop.remove_timeout(first)
    loop.remove_timeout(first)
    clock.now += 1
    loop._turn()
    assert ran == []
    assert loop._cancelled == 0 and loop._timers == []


def test_cancelled_timers_do_not_pile_up(loop, clock):
    for _ in range(3 * COMPACT_AFTER):
        loop.remove_timeout(loop.call_later(10, lambda: None))
    kept = loop.call_later(10, lambda: None)
    assert len(loop._timers) <= COMPACT_AFTER + 2
    assert kept in loop._timers


def test_callbacks_added_by_a_callback_wait_for_the_next_turn(loop, clock):
    ran = []
    loop.add_callback(lambda: (ran.append(1), loop.add_callback(lambda: ran.append(2))))
    loop._turn()
    assert ran == [1]
    loop._turn()
    assert ran == [1, 2]


def test_another_thread_s_callback_wakes_a_waiting_loop_and_stop_ends_it(loop):
    thread = run_on_thread(loop)
    done = threading.Event()
    loop.add_callback(done.set)  # the loop is waiting up to MAX_WAIT_S: woken, not timed out
    assert done.wait(0.5)
    loop.stop()
    thread.join(2)
    assert not thread.is_alive()


def test_the_loop_is_not_reentrant(loop):
    errors = []

    def again():
        try:
            loop.start()
        except RuntimeError as error:
            errors.append(str(error))
        loop.stop()

    loop.add_callback(again)
    loop.start()
    assert errors == ["the loop is running already"]


def test_handlers_get_the_events_they_watch_for(loop):
    ours, peer = socket.socketpair()
    try:
        seen = []
        loop.add_handler(ours.fileno(), lambda fd, events: seen.append(events), loop.READ)
        peer.send(b"x")
        loop._turn()
        assert seen == [loop.READ]
        loop.update_handler(ours.fileno(), loop.WRITE)
        loop._turn()
        assert seen[-1] == loop.WRITE  # readable still, but no longer watched for
        loop.remove_handler(ours.fileno())
        loop.remove_handler(ours.fileno())  # twice: harmless
        count = len(seen)
        loop._turn()
        assert len(seen) == count
    finally:
        ours.close()
        peer.close()


def test_a_loop_that_keeps_finding_data_waiting_lingers_and_one_that_waits_does_not(loop):
    """Three turns in a row with a descriptor ready at once, then each turn sleeps the linger
    (50 ms here: a lower bound on real time, whatever the host's load) unless a timer is due
    sooner; a turn that waits for its timer, nothing ready, ends the streak."""
    ours, peer = socket.socketpair()
    loop._linger_ns = 50_000_000
    try:
        loop.add_handler(ours.fileno(), lambda fd, events: None, loop.READ)
        peer.send(b"x")  # never read: ready on every turn
        for expected in range(1, BUSY_TURNS):
            started = time.monotonic()
            loop._turn()
            assert loop._busy == expected and time.monotonic() - started < 0.05
        started = time.monotonic()
        loop._turn()
        assert loop._busy == BUSY_TURNS and time.monotonic() - started >= 0.05
        loop.call_later(0.03, lambda: None)  # due within the linger: kept on time
        started = time.monotonic()
        loop._turn()
        assert loop._busy > BUSY_TURNS and time.monotonic() - started < 0.03
        loop.remove_handler(ours.fileno())
        loop.call_later(0.002, lambda: None)
        loop._turn()  # waits for the timer: nothing was ready
        assert loop._busy == 0
    finally:
        ours.close()
        peer.close()


def test_the_linger_is_read_from_the_environment_and_a_bad_value_named(caplog):
    assert loop_module.linger_ns({}) == loop_module.DEFAULT_LINGER_US * 1000
    assert loop_module.linger_ns({"SURGE_LOOP_LINGER_US": "0"}) == 0
    assert loop_module.linger_ns({"SURGE_LOOP_LINGER_US": " 350 "}) == 350_000
    assert loop_module.linger_ns({"SURGE_LOOP_LINGER_US": "-5"}) == \
        loop_module.DEFAULT_LINGER_US * 1000
    assert "SURGE_LOOP_LINGER_US='-5': expected whole microseconds" in caplog.text


def test_a_direct_reader_is_called_on_a_plain_readable_event_only(loop):
    ours, peer = socket.socketpair()
    try:
        handled, direct = [], []
        loop.add_handler(ours.fileno(), lambda fd, events: handled.append(events),
                         loop.READ | loop.WRITE)
        loop.direct_reader(ours.fileno(), lambda: direct.append(ours.recv(10)))
        peer.send(b"x")
        loop._turn()  # readable and writable: the handler decides
        assert handled == [loop.READ | loop.WRITE] and direct == []
        loop.update_handler(ours.fileno(), loop.READ)
        loop._turn()
        assert direct == [b"x"]
        loop.remove_handler(ours.fileno())
        assert ours.fileno() not in loop._readers
    finally:
        ours.close()
        peer.close()


def test_pika_s_transport_reads_through_the_direct_reader(loop):
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    received: list[bytes] = []
    transport = _AsyncPlaintextTransport(ours, SimpleNamespace(data_received=received.append),
                                         nbio=SelectorIOServicesAdapter(loop))
    connection = SimpleNamespace(_transport=transport, _adapter_emit_data=transport.write,
                                 bytes_sent=0, frames_sent=0,
                                 _on_data_available=received.append)
    install_direct_io(connection)
    try:
        assert ours.fileno() in loop._readers
        thread = run_on_thread(loop)
        peer.sendall(b"hello")
        for _ in range(100):
            if received:
                break
            threading.Event().wait(0.01)
        loop.stop()
        thread.join(2)
        assert received == [b"hello"]
    finally:
        ours.close()
        peer.close()
