"""The compiled hot path against its pure-Python reference: the same inputs through both, every
output compared (results.rundir.compiled)."""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers import accounting, workers
from drivers.amqp import acks, frames, wire
from drivers.header import HEADER_SIZE, PREFIX, encode
from results.rundir import compiled, histogram
from tests.unit.test_amqp_frames import HEARTBEAT, delivery, frame, short

try:
    speedups = importlib.import_module("drivers._speedups")
    compiled_histogram = importlib.import_module("results.rundir._histogram")
except ImportError:  # a checkout without a build: test_the_dev_install_built_them says so
    speedups = compiled_histogram = None

needs_build = pytest.mark.skipif(speedups is None, reason="the compiled cores are not built")


def test_the_dev_install_built_them():
    """Where a C compiler is, the dev install (make deps) builds the compiled cores."""
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler here: the pure path is all there is")
    assert speedups is not None and compiled_histogram is not None, \
        "run `make deps` (or setup.py build_ext --inplace) to build them"


def test_surge_speedups_0_turns_them_off():
    code = ("from drivers.amqp import frames; from results.rundir import compiled, histogram; "
            "print(frames.FrameDecoder.__module__, histogram.LatencyHistogram.__mro__[1]"
            ".__module__, compiled.state())")
    env = {**os.environ, compiled.ENV: "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split(" ", 2)
    assert out[:2] == ["drivers.amqp.frames", "results.rundir.histogram"]
    assert out[2].strip() == "pure (turned off by SURGE_SPEEDUPS=0)"


@needs_build
def test_the_compiled_ones_run_by_default():
    assert frames.FrameDecoder is speedups.FrameDecoder
    assert frames.stamp_run is speedups.stamp_run
    assert accounting.SequenceTracker.__mro__[1] is speedups.TrackerCore
    assert histogram.LatencyHistogram.__mro__[1] is compiled_histogram.HistogramCore
    assert compiled.state() == "compiled"


# --- the decoder: the same stream, in the same pieces, through both --------------------------

def other_method(channel: int) -> bytes:
    """Basic.Consume-ok: a method frame that is not the decoder's."""
    return frame(1, channel, struct.pack(">HH", 60, 21) + short("ctag-1"))


def stream(sizes: list[int], frame_max: int = 512) -> bytes:
    """Deliveries of these body sizes on channel 1, with frames of channel 2, heartbeats and
    other methods between them."""
    parts = []
    for tag, size in enumerate(sizes, 1):
        body = (encode(7, tag, 10**18 + tag, tag % 3 - 1) + bytes(size))[:size]
        properties = frames.basic_properties(1 + tag % 2, b"%08x:%016x" % (7, tag),
                                             b"amq.gen-%d" % tag) if tag % 2 else b"\0\0"
        parts.append(delivery(1, tag, body, redelivered=tag % 4 == 0, frame_max=frame_max,
                              properties=properties))
        if tag % 3 == 0:
            parts += [HEARTBEAT, delivery(2, tag, body), other_method(1)]
    return b"".join(parts)


def run(decoder_class, pieces: list[bytes], properties: bool = False) -> list:
    """Everything a decoder says while it reads ``pieces``: each delivery (its buffer's bytes
    from the offset on, and its properties if asked for), each frame passed on, each feed's
    answer, and its state after it."""
    said: list = []
    decoder = decoder_class(
        1, lambda buffer, offset, tag, redelivered, *props: said.append(
            ("delivery", bytes(buffer[offset:offset + HEADER_SIZE]), tag, redelivered,
             *map(bytes, props))),
        lambda raw: said.append(("frame", bytes(raw))), properties)
    for piece in pieces:
        said.append(("fed", decoder.feed(piece), bytes(decoder.leftover), decoder.tag,
                     decoder.redelivered, decoder.remaining, decoder.first_offset,
                     decoder.skip))
    return said


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


@needs_build
@pytest.mark.parametrize("frame_max", [64, 512, 4096])
def test_the_decoders_agree_on_a_stream_split_at_every_byte(frame_max):
    data = stream([0, 1, 28, 40, 300, 2048, 28, 5000][: 8 if frame_max > 64 else 5],
                  frame_max)
    for cut in range(len(data) + 1):
        pieces = [data[:cut], data[cut:]]
        assert run(speedups.FrameDecoder, pieces) == run(frames.PyFrameDecoder, pieces), cut


@needs_build
def test_the_compiled_decoder_reads_a_bytearray_as_it_reads_bytes():
    data = stream([0, 28, 300, 5000], 512)
    for cut in range(0, len(data) + 1, 7):
        pieces = [data[:cut], data[cut:]]
        assert run(speedups.FrameDecoder, [bytearray(p) for p in pieces]) == \
            run(speedups.FrameDecoder, pieces), cut


@needs_build
@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=12),
       cuts=st.lists(st.integers(0, 1 << 20), max_size=30),
       frame_max=st.sampled_from([40, 100, 512, 4096, 131072]), properties=st.booleans())
def test_the_decoders_agree_on_any_stream_in_any_pieces(sizes, cuts, frame_max, properties):
    pieces = split(stream(sizes, frame_max), cuts)
    assert run(speedups.FrameDecoder, pieces, properties) == \
        run(frames.PyFrameDecoder, pieces, properties)


@needs_build
@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 30), first_seq=st.integers(0, 2**64 - 31), gap=st.integers(16, 90))
def test_the_sequence_digits_agree(n, first_seq, gap):
    offsets = range(3, 3 + n * gap, gap)
    buffers = [bytearray(b"x" * (3 + n * gap)) for _ in range(2)]
    frames.py_stamp_sequences(buffers[0], offsets, first_seq)
    speedups.stamp_sequences(buffers[1], list(offsets), first_seq)
    assert buffers[0] == buffers[1]


@needs_build
def test_both_decoders_refuse_a_wrong_end_marker_alike():
    bad = delivery(1, 1, bytes(100))[:-1] + b"\x00"
    for decoder_class in (speedups.FrameDecoder, frames.PyFrameDecoder):
        decoder = decoder_class(1, lambda *a: None, lambda raw: None)
        with pytest.raises(frames.FrameError, match="invalid frame end marker"):
            decoder.feed(bad)


# --- the encoder's stamps ------------------------------------------------------------------

lags = st.tuples(st.sampled_from([0, 1]), st.integers(-10**6, 10**6),
                 st.sampled_from([0.0, 0.5, 1.0, 333.3333, 1e4 / 3]))


@needs_build
@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), producer_id=st.integers(0, 2**32 - 1),
       first_seq=st.integers(0, 2**63), send_ns=st.integers(-2**63, 2**63 - 1), lags=lags)
def test_the_stamps_agree_on_a_run(n, producer_id, first_seq, send_ns, lags):
    first_seq = min(first_seq, 2**64 - 1 - n)
    encoder = frames.FrameEncoder(1, "q", 60, False, 4096)
    first, step = encoder.header_offset + len(PREFIX), encoder.length
    buffers = [bytearray(encoder._mutable * n) for _ in range(2)]
    frames.py_stamp_run(buffers[0], first, step, n, producer_id, first_seq, send_ns, lags)
    speedups.stamp_run(buffers[1], first, step, n, producer_id, first_seq, send_ns, lags)
    assert buffers[0] == buffers[1]


@needs_build
@settings(max_examples=200, deadline=None)
@given(picks=st.lists(st.integers(0, 5), min_size=1, max_size=30),
       producer_id=st.integers(0, 2**32 - 1), first_seq=st.integers(0, 2**40), lags=lags)
def test_the_stamps_agree_on_mixed_templates(picks, producer_id, first_seq, lags):
    templates = frames.Templates(1, 100, [("", "a"), ("x", "bb")], [28, 90, 300],
                                 [b"", bytes(62), bytes(272)], True)
    parts = b"".join(templates.methods[i] + templates.contents[i] for i in picks)
    buffers = [bytearray(parts) for _ in range(2)]
    for stamp, buffer in zip((frames.py_stamp_picks, speedups.stamp_picks), buffers):
        stamp(buffer, picks, templates.lengths, templates.header_at, producer_id, first_seq,
              10**18, lags)
    assert buffers[0] == buffers[1]


@needs_build
def test_a_stamp_past_the_buffer_is_refused():
    with pytest.raises(ValueError, match="after the buffer's end"):
        speedups.stamp_run(bytearray(40), 20, 10, 1, 1, 0, 0, (0, 0, 0.0))


# --- the cores of the tracker and the histogram ----------------------------------------------

def tracker(core, stream_reader: bool):
    made = type("Tracker", (core,), {"__slots__": (),
                                     "__init__": accounting.SequenceTracker.__init__})
    return made(stream_reader)


@needs_build
@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 70000)), max_size=200),
       stream_reader=st.booleans())
def test_the_trackers_agree(records, stream_reader):
    pure, fast = (tracker(core, stream_reader)
                  for core in (accounting.TrackerCore, speedups.TrackerCore))
    assert [pure.record(*r) for r in records] == [fast.record(*r) for r in records]
    for name in ("received", "duplicates", "out_of_order", "rereads"):
        assert getattr(pure, name) == getattr(fast, name), name
    assert accounting.SequenceTracker.export(pure) == accounting.SequenceTracker.export(fast)
    assert {p: s.high for p, s in pure._producers.items()} == \
        {p: s.high for p, s in fast._producers.items()}


def filled(core, values: list[int]):
    made = type("Histogram", (core,), {"__slots__": (),
                                       "__init__": histogram.LatencyHistogram.__init__})()
    for value in values:
        made.record(value)
    return made


@needs_build
@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-100, 200), st.integers(-2**62, 2**62)),
                       max_size=100))
def test_the_histograms_agree(values):
    pure = filled(histogram.HistogramCore, values)
    fast = filled(compiled_histogram.HistogramCore, values)
    assert (pure._counts, pure.count, pure.total_us, pure._min, pure._max) == \
        (fast._counts, fast.count, fast.total_us, fast._min, fast._max)


# --- a receiver's accounting of each delivery -------------------------------------------------

def receiver(core, responder: bool, stream_reader: bool):
    role_class = workers.ResponderRole if responder else workers.ReceiverRole
    made = type("Role", (core,), {"__init__": role_class.__init__,
                                  "serves_requests": responder})
    return made(workers.Recorder(), stream=stream_reader)


FAR_PAST, FAR_FUTURE = 0, 2**62  # latencies clamped to the histogram's ends: the same in both

bodies = st.one_of(
    st.builds(lambda pid, seq, sent, lag: encode(pid, seq, sent, lag),
              st.integers(0, 3), st.integers(0, 500), st.sampled_from([FAR_PAST, FAR_FUTURE]),
              st.one_of(st.none(), st.integers(-2**31, 2**31 - 1))),
    st.builds(lambda pid, seq: struct.pack("!2sBBIQq", b"SG", 1, 0, pid, seq, FAR_PAST),
              st.integers(0, 3), st.integers(0, 500)),  # version 1
    st.binary(max_size=40))  # too short, a wrong magic, an unknown version


@needs_build
@settings(max_examples=300, deadline=None)
@given(deliveries=st.lists(st.tuples(bodies, st.integers(0, 5), st.booleans(),
                                     st.sampled_from([bytes, bytearray, memoryview])),
                           max_size=40),
       responder=st.booleans(), stream_reader=st.booleans())
def test_the_receivers_agree(deliveries, responder, stream_reader):
    pure, fast = (receiver(core, responder, stream_reader)
                  for core in (workers.ReceiverCore, speedups.ReceiverCore))
    for body, pad, redelivered, kind in deliveries:
        for role in (pure, fast):
            role.on_body(kind(bytes(pad) + body), pad, redelivered)
    a, b = pure.recorder, fast.recorder
    for name in ("received", "served", "redelivered", "header_errors"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("latency", "intended_latency"):
        assert getattr(a, name).to_dict() == getattr(b, name).to_dict(), name
    assert a.exports() == b.exports()


@needs_build
def test_the_compiled_receiver_measures_latency_on_the_wall_clock():
    role = receiver(speedups.ReceiverCore, False, False)
    before = time.time_ns()
    role.on_body(encode(1, 0, before - 5_000_000, None))
    after = time.time_ns()
    latency = role.recorder.latency
    assert latency.count == 1 and 5_000 <= latency.max_us <= (after - before) // 1000 + 5_000


# --- a plain receiver's window of unacknowledged deliveries -----------------------------------

@needs_build
@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.one_of(st.tuples(st.just("deliver"), st.integers(1, 2**40),
                                          st.booleans()),
                                st.tuples(st.just("took"), st.integers(1, 2**40)),
                                st.just(("acked",))), max_size=60),
       every=st.integers(0, 7))
def test_the_ack_windows_agree(steps, every):
    said: dict[str, list] = {"pure": [], "fast": []}
    windows = {}
    for name, core in (("pure", acks.PyAckWindow), ("fast", speedups.AckWindow)):
        recorder, calls = workers.Recorder(), said[name]

        def ack(tag, window_of=name, calls=calls):
            calls.append(("ack", tag))
            windows[window_of].acked()

        windows[name] = core(every, recorder, lambda *a, calls=calls: calls.append(a), ack)
    for step in steps:
        for name, window in windows.items():
            if step[0] == "deliver":
                window.deliver(b"body", 2, step[1], step[2])
            elif step[0] == "took":
                said[name].append(("full", window.took(step[1])))
            else:
                window.acked()
    pure, fast = windows["pure"], windows["fast"]
    assert said["pure"] == said["fast"]
    assert (pure.unacked, pure.last_tag, pure.recorder.unacked) == \
        (fast.unacked, fast.last_tag, fast.recorder.unacked)


@needs_build
@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(HEADER_SIZE, 700), max_size=30),
       cuts=st.lists(st.integers(0, 30_000), max_size=12), every=st.integers(0, 5),
       override=st.booleans())
def test_a_plain_receiver_s_chain_agrees_on_both_paths(sizes, cuts, every, override):
    """Decoder, window and receiver as a plain receiver chains them: on the compiled path the
    decoder calls the window and the window the receiver in C (unless a role of Python's
    own overrides ``on_body``), with what the pure chain gives."""
    said: dict[str, list] = {}
    recorders, windows = {}, {}
    for name, decoder_class, window_class, core in (
            ("pure", frames.PyFrameDecoder, acks.PyAckWindow, workers.ReceiverCore),
            ("fast", speedups.FrameDecoder, speedups.AckWindow, speedups.ReceiverCore)):
        role = receiver(core, False, False)
        if override:
            type(role).on_body = lambda self, *a, base=core.on_body: base(self, *a)
        calls = said[name] = []

        def ack(tag, calls=calls, name=name):
            calls.append(tag)
            windows[name].acked()

        windows[name] = window_class(every, role.recorder, role.on_body, ack)
        decoder = decoder_class(1, None, lambda raw, calls=calls: calls.append(bytes(raw)))
        decoder.on_delivery = windows[name].deliver
        assert decoder.on_delivery == windows[name].deliver
        for piece in split(stream(sizes), cuts):
            calls.append(decoder.feed(piece))
        recorders[name] = role.recorder
    assert said["pure"] == said["fast"]
    a, b = recorders["pure"], recorders["fast"]
    for name in ("received", "redelivered", "header_errors", "unacked"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.exports() == b.exports()
    assert a.latency.count == b.latency.count == len(sizes) - a.header_errors


# --- a fast-path connection's reads: the same bytes on a socket, read by both ------------------

class Transport:
    """The attributes a reader reads of pika's transport, under names of this test's own."""

    def __init__(self) -> None:
        self.state, self.size = "active", 4096


def read_all(reader_class, pieces: list[bytes], end: bool, decoding: bool = True) -> list:
    """Everything a reader does while its peer writes ``pieces`` (and closes, with ``end``):
    the deliveries (or with ``decoding`` off, the bytes pika is handed), its read sizes and
    counters after each readable event, pika's reader called at the end."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    said: list = []
    transport = Transport()
    connection = types.SimpleNamespace(bytes_received=0, frames_received=0)
    try:
        reader = reader_class(connection, transport, ours, ("state", "active", "size"),
                              lambda data: said.append(("pika's", bytes(data))),
                              lambda: said.append(("pika's reader",)), said.append, ValueError)
        decoder = frames.FrameDecoder(1, lambda buffer, offset, tag, redelivered: said.append(
            ("delivery", bytes(buffer[offset:offset + HEADER_SIZE]), tag, redelivered)),
            lambda raw: said.append(("frame", bytes(raw))))
        if decoding:
            reader.feed, reader.after_read = decoder.feed, lambda: said.append(("after",))
        reader.read()  # nothing there: would block, says nothing
        for piece in pieces:
            peer.sendall(piece)
            for _ in range(len(piece) // 4096 + 2):  # a level-triggered loop reads it all
                reader.read()
            said.append((transport.size, connection.bytes_received, connection.frames_received))
        if end:
            peer.close()
            reader.read()
        transport.state = "closing"
        reader.read()
    finally:
        ours.close()
        peer.close()
    return said


@needs_build
@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 9000), min_size=1, max_size=8),
       cuts=st.lists(st.integers(1, 60000), max_size=6), end=st.booleans(),
       decoding=st.booleans())
def test_the_readers_agree(sizes, cuts, end, decoding):
    pieces = [piece for piece in split(stream(sizes, 4096), cuts) if piece]
    pure, fast = (read_all(core, pieces, end, decoding)
                  for core in (wire.PyReader, speedups.Reader))
    assert pure == fast
    deliveries = [item for item in pure if item[0] == "delivery"]
    assert len(deliveries) == (len(sizes) if decoding else 0)


@needs_build
def test_both_readers_hand_a_broken_stream_to_abort_as_the_invalid_frame_error():
    bad = bytearray(delivery(1, 1, b"x" * 40))
    bad[-1] = 0
    outcomes = []
    for core in (wire.PyReader, speedups.Reader):
        said = read_all(core, [bytes(bad)], end=False)
        outcomes.append([(type(item).__name__, str(item)) for item in said
                         if isinstance(item, Exception)])
    assert outcomes[0] == outcomes[1] == [("ValueError", "invalid frame end marker")]


DRIVER_TESTS = ("test_accounting.py", "test_agent_receivers.py", "test_amqp_direct_io.py",
                "test_amqp_frames.py", "test_amqp_loop.py", "test_amqp_request_reply.py",
                "test_amqp_wire.py", "test_header.py", "test_histogram.py",
                "test_intended_latency.py", "test_roles.py", "test_routing.py")


def test_the_driver_tests_pass_on_the_pure_path_too():
    """The suite runs on the compiled path where it is built; these run again on the pure one
    (the reference), so that both stay green."""
    here = os.path.dirname(__file__)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *(os.path.join(here, name) for name in DRIVER_TESTS)],
        env={**os.environ, compiled.ENV: "0"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1]
