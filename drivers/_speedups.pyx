# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the drivers' per-message code: :class:`FrameDecoder` and the header
stamping of :mod:`drivers.amqp.frames` (``stamp_run``, ``stamp_picks``,
``stamp_sequences``), the
:class:`TrackerCore` of :mod:`drivers.accounting`, the :class:`ReceiverCore` of
:mod:`drivers.workers`, the :class:`AckWindow` of :mod:`drivers.amqp.acks`, the
:class:`LoopCore` of :mod:`drivers.amqp.loop` and the :class:`Reader` of
:mod:`drivers.amqp.wire`. Each does what its pure-Python reference
does, output for output (``tests/unit/test_compiled.py`` runs both on the same inputs);
:mod:`results.rundir.compiled` says which runs."""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.ref cimport Py_DECREF, PyObject
from libc.errno cimport EAGAIN, EINTR, errno
from libc.math cimport ceil
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

from results.rundir._histogram cimport HistogramCore

cdef enum:
    FRAME_END = 0xCE
    HEADER_SIZE = 28  # drivers.header.HEADER_SIZE
    DELIVER_INDEX = (60 << 16) | 60  # Basic.Deliver: class 60, method 60
    INITIAL_BYTES = 1024  # drivers.accounting._INITIAL_BYTES

cdef bytes EMPTY_BODY = b"\0" * HEADER_SIZE


cdef inline uint32_t be32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t be64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>be32(p) << 32) | be32(p + 4)


cdef inline void put32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = v >> 24
    p[1] = v >> 16
    p[2] = v >> 8
    p[3] = v


cdef inline void put64(uint8_t* p, uint64_t v) noexcept nogil:
    put32(p, v >> 32)
    put32(p + 4, <uint32_t>v)


cdef object _bad_end():
    from drivers.amqp.frames import FrameError  # the pure module's, whichever decoder raised
    return FrameError("invalid frame end marker")


cdef inline void _stamp(uint8_t* p, uint8_t flags, uint32_t producer_id, uint64_t seq,
                        int64_t send_ns, int32_t lag) noexcept nogil:
    p[0] = flags
    put32(p + 1, producer_id)
    put64(p + 5, seq)
    put64(p + 13, <uint64_t>send_ns)
    put32(p + 21, <uint32_t>lag)


cdef inline int32_t _lag(double lag) except? -1:
    if not -2147483648.0 <= lag <= 2147483647.0:
        raise OverflowError(f"schedule lag {lag} us is out of the header's int32 range")
    return <int32_t>lag


cdef uint8_t* _room(bytearray buffer, Py_ssize_t last) except NULL:
    if last > PyByteArray_GET_SIZE(buffer):
        raise ValueError(f"a header ends at byte {last}, after the buffer's end")
    return <uint8_t*>PyByteArray_AS_STRING(buffer)


def stamp_run(bytearray buffer, Py_ssize_t first, Py_ssize_t step, Py_ssize_t n,
              uint32_t producer_id, uint64_t first_seq, int64_t send_ns, tuple lags):
    """Stamp the headers of ``n`` messages ``step`` bytes apart (see the pure reference)."""
    cdef uint8_t flags = lags[0]
    cdef double lag = <long long>lags[1], less = lags[2]
    cdef Py_ssize_t i
    if n <= 0:
        return
    cdef uint8_t* p = _room(buffer, first + (n - 1) * step + HEADER_SIZE - 3)
    for i in range(n):
        _stamp(p + first + i * step, flags, producer_id, first_seq + i, send_ns, _lag(lag))
        lag -= less


def stamp_picks(bytearray buffer, list picks, list lengths, list header_at,
                uint32_t producer_id, uint64_t first_seq, int64_t send_ns, tuple lags):
    """Stamp the headers of consecutive messages through their templates (see the pure
    reference)."""
    cdef uint8_t flags = lags[0]
    cdef double lag = <long long>lags[1], less = lags[2]
    cdef Py_ssize_t i, pick, start = 0, at, n = len(picks)
    cdef uint8_t* p = _room(buffer, 0)
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(buffer)
    for i in range(n):
        pick = picks[i]
        at = start + <Py_ssize_t>header_at[pick] + 3
        if at + HEADER_SIZE - 3 > size:
            raise ValueError(f"a header ends at byte {at + HEADER_SIZE - 3}, after the "
                             "buffer's end")
        _stamp(p + at, flags, producer_id, first_seq + i, send_ns, _lag(lag))
        lag -= less
        start += <Py_ssize_t>lengths[pick]


cdef const char* HEX = b"0123456789abcdef"


def stamp_sequences(bytearray buffer, offsets, uint64_t first_seq):
    """Message ``k``'s sequence number ``first_seq + k`` in 16 lowercase hex digits at
    ``offsets[k]`` (see the pure reference)."""
    cdef uint8_t* p = <uint8_t*>PyByteArray_AS_STRING(buffer)
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(buffer), at
    cdef uint64_t seq = first_seq
    cdef int digit
    for offset in offsets:
        at = offset
        if at < 0 or at + 16 > size:
            raise ValueError(f"sequence digits at byte {at}: outside the buffer")
        for digit in range(16):
            p[at + digit] = HEX[(seq >> (60 - 4 * digit)) & 0xF]
        seq += 1


cdef class Producer:
    """One producer's bitmap of sequence numbers seen, and the highest one."""

    cdef public bytearray bits
    cdef public long long high

    def __init__(self):
        self.bits = bytearray(INITIAL_BYTES)
        self.high = -1


cdef class TrackerCore:
    """The compiled twin of ``drivers.accounting.TrackerCore``."""

    cdef public dict _producers
    cdef public long long received, duplicates, out_of_order, rereads
    cdef public bint stream

    cpdef bint record(self, object producer_id, unsigned long long seq) except? 0:
        """Record one delivery; whether it is the first of that message here."""
        cdef Producer state = self._producers.get(producer_id)
        cdef Py_ssize_t i = seq >> 3, length
        cdef uint8_t mask = 1 << (seq & 7)
        cdef uint8_t* bits
        if state is None:
            state = Producer()
            self._producers[producer_id] = state
        length = PyByteArray_GET_SIZE(state.bits)
        if i >= length:
            grown = max(i + 1, 2 * length)
            PyByteArray_Resize(state.bits, grown)
            memset(PyByteArray_AS_STRING(state.bits) + length, 0, grown - length)
        bits = <uint8_t*>PyByteArray_AS_STRING(state.bits)
        if bits[i] & mask:
            if self.stream:
                self.rereads += 1
                return False
            self.received += 1
            self.duplicates += 1
            return False
        self.received += 1
        bits[i] |= mask
        if <long long>seq < state.high:
            self.out_of_order += 1
        else:
            state.high = seq
        return True


cdef object _wall_clock = None
cdef object _monotonic_clock = None


def use_clocks(wall=None, monotonic=None):
    """Read the clocks through these: fakes in tests that fake ``time`` for the pure code,
    ``wall`` as ``time.time_ns`` (ns since the epoch), ``monotonic`` as ``time.monotonic``
    (seconds); ``None``, the system's."""
    global _wall_clock, _monotonic_clock
    _wall_clock, _monotonic_clock = wall, monotonic


cdef inline int64_t _now_ns() except? -1:
    cdef timespec now
    if _wall_clock is not None:
        return _wall_clock()
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000000000 + now.tv_nsec


cdef inline int64_t _us(int64_t ns) noexcept nogil:
    """``ns // 1000`` as Python floors it (a negative latency: clocks that disagree)."""
    cdef int64_t us = ns / 1000
    return us - 1 if ns % 1000 < 0 else us


cdef class RecorderCounts:
    """The compiled twin of ``drivers.workers.RecorderCounts``, the base of every
    ``Recorder``: the counts and histograms each delivery changes, as fields that
    :class:`ReceiverCore` and :class:`AckWindow` change without a Python attribute lookup (a
    Python attribute of the recorder is a dictionary lookup and a new integer object per
    delivery)."""

    cdef public long long received, redelivered, served, header_errors, unacked
    cdef public HistogramCore latency, intended_latency


cdef class ReceiverCore:
    """The compiled twin of ``drivers.workers.ReceiverCore``: a version 2 header read here,
    anything else (version 1, too short, not a header) by ``drivers.header.decode``."""

    cdef public RecorderCounts recorder
    cdef public TrackerCore tracker
    cdef public bint stream
    serves_requests = False

    def on_body(self, body, Py_ssize_t offset=0, bint redelivered=False):
        """Account for one delivered message whose body starts at ``offset`` in ``body``."""
        self._account(body, offset, redelivered)

    cdef int _account(self, body, Py_ssize_t offset, bint redelivered) except -1:
        cdef const uint8_t* p = NULL
        cdef Py_ssize_t size = 0
        cdef uint32_t producer_id
        cdef uint64_t seq
        cdef int64_t sent_ns, latency_us
        cdef int32_t lag_us
        cdef bint scheduled
        cdef HistogramCore histogram
        cdef RecorderCounts recorder = self.recorder
        if type(body) is bytes:
            p, size = <const uint8_t*>PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body)
        elif type(body) is bytearray:
            p, size = <const uint8_t*>PyByteArray_AS_STRING(body), PyByteArray_GET_SIZE(body)
        if p != NULL and 0 <= offset and size - offset >= HEADER_SIZE and \
                p[offset] == 0x53 and p[offset + 1] == 0x47 and p[offset + 2] == 2:  # SG, v2
            p += offset
            scheduled = p[3] & 1
            producer_id, seq = be32(p + 4), be64(p + 8)
            sent_ns, lag_us = <int64_t>be64(p + 16), <int32_t>be32(p + 24)
        else:
            from drivers.header import HeaderError, decode
            try:
                producer_id, seq, sent_ns, lag = decode(body, offset)
            except HeaderError:
                recorder.header_errors += 1
                return 0
            scheduled, lag_us = lag is not None, lag or 0
        if not self.tracker.record(producer_id, seq) and self.stream:
            return 0
        if self.serves_requests:
            recorder.served += 1
        else:
            latency_us = _us(_now_ns() - sent_ns)
            histogram = recorder.latency
            histogram.add(latency_us)
            if scheduled:
                histogram = recorder.intended_latency
                histogram.add(latency_us + lag_us)
            recorder.received += 1
        if redelivered:
            recorder.redelivered += 1
        return 0


@cython.final
cdef class AckWindow:
    """The compiled twin of ``drivers.amqp.acks.PyAckWindow``."""

    cdef public long long every, unacked, last_tag
    cdef public RecorderCounts recorder
    cdef public object ack
    cdef object _on_body
    cdef ReceiverCore _core  # on_body's receiver, when it is a compiled ReceiverCore's own

    def __init__(self, long long every, recorder, on_body, ack):
        self.every, self.recorder, self.on_body, self.ack = every, recorder, on_body, ack
        self.unacked = self.last_tag = 0

    @property
    def on_body(self):
        """How a message is accounted for; a compiled :class:`ReceiverCore`'s own
        ``on_body`` is run from here without a Python call."""
        return self._on_body

    @on_body.setter
    def on_body(self, value):
        self._on_body = value
        owner = getattr(value, "__self__", None)
        self._core = owner if isinstance(owner, ReceiverCore) and \
            getattr(value, "__name__", "") == "on_body" and \
            getattr(type(owner), "on_body", None) is ReceiverCore.on_body else None

    cpdef bint took(self, long long tag) except -1:
        """Delivery ``tag`` is held unacknowledged; whether the window is full."""
        self.last_tag = tag
        self.unacked += 1
        self.recorder.unacked += 1
        return self.unacked >= self.every

    def acked(self):
        """Everything taken was acknowledged (or went back with its channel)."""
        self.recorder.unacked -= self.unacked
        self.unacked = 0

    def deliver(self, buffer, Py_ssize_t offset, long long tag, bint redelivered):
        """A plain receiver's delivery: accounted for, held, acknowledged with its batch."""
        self._deliver(buffer, offset, tag, redelivered)

    cdef int _deliver(self, buffer, Py_ssize_t offset, long long tag,
                      bint redelivered) except -1:
        if self._core is not None:
            self._core._account(buffer, offset, redelivered)
        else:
            self._on_body(buffer, offset, redelivered)
        if self.every and self.took(tag):
            self.ack(tag)
        return 0


cdef inline int _hand(AckWindow window, on_delivery, buffer, Py_ssize_t offset,
                      unsigned long long tag, bint redelivered) except -1:
    if window is not None:
        window._deliver(buffer, offset, tag, redelivered)
    else:
        on_delivery(buffer, offset, tag, redelivered)
    return 0


cdef class FrameDecoder:
    """The compiled twin of ``drivers.amqp.frames.FrameDecoder``: same constructor, same
    :meth:`feed`, same calls of ``on_delivery`` and ``on_frame``."""

    cdef public int channel_number
    cdef public object on_frame, leftover, first_buffer, properties
    cdef object _on_delivery
    cdef AckWindow _window  # on_delivery's window, when it is a compiled AckWindow's deliver
    cdef public unsigned long long tag
    cdef public bint redelivered, with_properties
    cdef public long long remaining, first_offset, skip

    def __init__(self, int channel_number, on_delivery, on_frame, bint properties=False):
        self.channel_number = channel_number
        self.on_delivery = on_delivery
        self.on_frame = on_frame
        self.with_properties = properties
        self.properties = b""
        self.leftover = b""
        self.tag = 0
        self.redelivered = False
        self.remaining = -1
        self.first_buffer, self.first_offset = b"", 0
        self.skip = 0

    @property
    def on_delivery(self):
        """Where each delivery goes; a compiled :class:`AckWindow`'s ``deliver`` is called
        from here without a Python call."""
        return self._on_delivery

    @on_delivery.setter
    def on_delivery(self, value):
        self._on_delivery = value
        owner = getattr(value, "__self__", None)
        self._window = owner if type(owner) is AckWindow and \
            getattr(value, "__name__", "") == "deliver" else None

    def feed(self, data):
        """Read ``data``, the next bytes of the stream: how many bytes it took in and how many
        frames it read itself (see the pure-Python reference)."""
        cdef int channel_number = self.channel_number, kind, channel
        cdef unsigned long long tag = self.tag
        cdef bint redelivered = self.redelivered, keep = self.with_properties
        cdef long long remaining = self.remaining, first_offset = self.first_offset
        cdef long long skip = self.skip, size
        cdef Py_ssize_t pos = 0, frames = 0, end, end_of_data, held, tag_at, n
        cdef const uint8_t* b = NULL
        on_delivery = self._on_delivery
        cdef AckWindow window = self._window
        first_buffer, properties = self.first_buffer, self.properties
        if type(data) is not bytes:  # a socket read always is: read in place
            data = bytes(data)
        n = len(data)
        if skip:
            if n < skip:
                self.skip = skip - n
                return n, 0
            if (<const uint8_t*>PyBytes_AS_STRING(data))[skip - 1] != FRAME_END:
                raise _bad_end()
            pos, skip, frames = skip, 0, 1
            self.skip = 0
            if remaining <= 0:
                remaining = -1
                if keep:
                    on_delivery(first_buffer, first_offset, tag, redelivered, properties)
                else:
                    _hand(window, on_delivery, first_buffer, first_offset, tag, redelivered)
        leftover = self.leftover
        buffer = leftover + data if leftover else data
        end_of_data, held = len(buffer), len(leftover)
        if end_of_data:
            b = <const uint8_t*>PyBytes_AS_STRING(buffer)
        while end_of_data - pos >= 7:
            kind = b[pos]
            channel = (b[pos + 1] << 8) | b[pos + 2]
            size = be32(b + pos + 3)
            end = pos + 8 + size
            if end > end_of_data:
                if kind == 3 and channel == channel_number and remaining > 0 and (
                        first_offset >= 0 or end_of_data - pos - 7 >= HEADER_SIZE):
                    if first_offset < 0:
                        first_buffer, first_offset = buffer, pos + 7
                    remaining -= size
                    skip, pos = end - end_of_data, end_of_data
                break
            if b[end - 1] != FRAME_END:
                raise _bad_end()
            if channel == channel_number:
                if kind == 3 and remaining > 0:
                    frames += 1
                    if first_offset < 0:
                        first_buffer, first_offset = buffer, pos + 7
                    remaining -= size
                    if remaining <= 0:
                        remaining = -1
                        if keep:
                            on_delivery(first_buffer, first_offset, tag, redelivered,
                                        properties)
                        else:
                            _hand(window, on_delivery, first_buffer, first_offset, tag, redelivered)
                    pos = end
                    continue
                if kind == 2 and remaining == 0:
                    frames += 1
                    remaining = <long long>be64(b + pos + 11)
                    first_offset = -1
                    if keep:  # after class id, weight and body size: flags, properties
                        properties = buffer[pos + 19:end - 1]
                    if remaining == 0:
                        remaining = -1
                        if keep:
                            on_delivery(EMPTY_BODY, 0, tag, redelivered, properties)
                        else:
                            _hand(window, on_delivery, EMPTY_BODY, 0, tag, redelivered)
                    pos = end
                    continue
                if kind == 1 and be32(b + pos + 7) == DELIVER_INDEX:
                    frames += 1
                    tag_at = pos + 12 + b[pos + 11]
                    tag = be64(b + tag_at)
                    redelivered = b[tag_at + 8] & 1
                    remaining = 0
                    pos = end
                    continue
            self.on_frame(buffer[pos:end])
            pos = end
        self._keep(buffer, pos, tag, redelivered, remaining, first_buffer, first_offset, skip)
        self.properties = properties
        return held + n - len(self.leftover), frames

    cdef void _keep(self, buffer, Py_ssize_t pos, unsigned long long tag, bint redelivered,
                    long long remaining, first_buffer, long long first_offset,
                    long long skip):
        self.leftover = buffer[pos:] if pos < len(buffer) else b""
        self.tag, self.redelivered, self.remaining = tag, redelivered, remaining
        self.first_buffer, self.first_offset, self.skip = first_buffer, first_offset, skip



cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        int fd
    struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)

cdef enum:
    EPOLLIN = 0x001
    EPOLLERR = 0x008
    EPOLLHUP = 0x010
    READY_AT_ONCE = 64  # descriptors one wait hands back at most; the rest come next turn
    MAX_WAIT_MS = 1000  # drivers.amqp.loop.MAX_WAIT_S
    BUSY_TURNS = 3  # drivers.amqp.loop.BUSY_TURNS
    BUSY_WAIT_NS = 50000  # drivers.amqp.loop.BUSY_WAIT_NS

cdef extern from "<time.h>" nogil:
    int nanosleep(const timespec* req, timespec* rem)


cdef inline int64_t _real_monotonic_ns() noexcept nogil:
    """The monotonic clock itself (a loop's linger is real time, also under a test's clocks)."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return <int64_t>now.tv_sec * 1000000000 + now.tv_nsec


cdef void _nap(long long ns) noexcept nogil:
    cdef timespec pause
    pause.tv_sec, pause.tv_nsec = ns // 1000000000, ns % 1000000000
    nanosleep(&pause, NULL)



cdef inline double _monotonic() except? -1:
    if _monotonic_clock is not None:
        return _monotonic_clock()
    return _real_monotonic_ns() * 1e-9


cdef class LoopCore:
    """The compiled twin of ``drivers.amqp.loop.LoopCore``: the same turn, waiting in
    ``epoll_wait`` on the loop's epoll descriptor itself (``_epfd``)."""

    cdef public object _timers, _handlers, _events, _readers, _callbacks
    cdef public int _epfd, _wake_read
    cdef public bint _stopping
    cdef public long long _linger_ns
    cdef public int _busy
    cdef epoll_event _ready[READY_AT_ONCE]

    def _turns(self):
        """Turn until ``_stopping``."""
        while not self._stopping:
            self._turn_once()

    def _turn(self):
        """One turn (see the pure one)."""
        self._turn_once()

    def _wait_s(self):
        """How long this turn may wait for a descriptor (see the pure one)."""
        return self._wait()

    cdef double _wait(self) except? -1:
        if self._callbacks:
            return 0.0
        if self._timers:
            return min(max(0.0, <double>self._timers[0][0] - _monotonic()), MAX_WAIT_MS / 1000.0)
        return MAX_WAIT_MS / 1000.0

    cdef int _turn_once(self) except -1:
        cdef int n, i, fd, timeout_ms
        cdef int64_t started
        cdef uint32_t ready
        timers, handlers, events, readers = self._timers, self._handlers, self._events, \
            self._readers
        timeout_ms = <int>ceil(self._wait() * 1000.0)  # as select.epoll.poll rounds
        started = _real_monotonic_ns()
        with nogil:
            n = epoll_wait(self._epfd, self._ready, READY_AT_ONCE, timeout_ms)
        if n > 0 and _real_monotonic_ns() - started < BUSY_WAIT_NS:
            self._busy += 1
        else:
            self._busy = 0
        if n < 0:
            if errno != EINTR:
                import os
                raise OSError(errno, os.strerror(errno))
            n = 0
        for i in range(n):
            fd, ready = self._ready[i].data.fd, self._ready[i].events
            handler = handlers.get(fd)
            if handler is not None:
                if ready == EPOLLIN:
                    reader = readers.get(fd)
                    if reader is not None:
                        reader()
                        continue
                ready &= <uint32_t>events[fd] | EPOLLERR | EPOLLHUP
                if ready:
                    handler(fd, ready)
            elif fd == self._wake_read:
                self._woken()
        callbacks = self._callbacks
        for i in range(len(callbacks)):  # what these add waits for the next turn
            callbacks.popleft()()
        if timers and <double>timers[0][0] <= _monotonic():
            self._run_timers()
        if self._busy >= BUSY_TURNS and self._linger_ns > 0 and not self._callbacks and (
                not timers or <double>timers[0][0] - _monotonic() > self._linger_ns / 1e9):
            with nogil:
                _nap(self._linger_ns)
        return 0


cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    enum: MSG_DONTWAIT

cdef extern from "Python.h":
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char* v, Py_ssize_t n) except NULL
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t n) except -1
    char* _bytes_of "PyBytes_AS_STRING"(PyObject* bytes) nogil

cdef enum:
    RECV_BYTES = 64 * 1024  # drivers.amqp.wire.RECV_BYTES
    MAX_RECV_BYTES = 1024 * 1024  # drivers.amqp.wire.MAX_RECV_BYTES


cdef class Reader:
    """The compiled twin of ``drivers.amqp.wire.PyReader``: its ``recv`` made here, on the
    socket's descriptor."""

    cdef public object connection, transport, sock, state_attr, active, size_attr
    cdef public object on_data, pika_reader, abort, invalid_frame, feed, after_read
    cdef int fd

    def __init__(self, connection, transport, sock, names, on_data, pika_reader, abort,
                 invalid_frame):
        self.connection, self.transport, self.sock = connection, transport, sock
        self.state_attr, self.active, self.size_attr = names
        self.on_data, self.pika_reader, self.abort = on_data, pika_reader, abort
        self.invalid_frame = invalid_frame
        self.feed = self.after_read = None
        self.fd = -1 if sock is None else sock.fileno()

    def read(self):
        """One readable event."""
        cdef Py_ssize_t size
        cdef ssize_t got
        cdef PyObject* raw
        cdef char* into
        transport = self.transport
        if getattr(transport, self.state_attr) != self.active:
            return self.pika_reader()
        size = getattr(transport, self.size_attr)
        raw = _new_bytes(NULL, size)
        into = _bytes_of(raw)
        got = recv(self.fd, into, size, MSG_DONTWAIT)  # never waits: the GIL stays held
        if got <= 0:
            Py_DECREF(<object>raw)
            if got < 0 and (errno == EAGAIN or errno == EINTR):
                return None
            return self.pika_reader()  # the end of the stream, or a broken socket
        if got < size:
            _PyBytes_Resize(&raw, got)
        data = <object>raw
        Py_DECREF(data)  # <object> took a reference of its own
        try:
            self.take(data)
        except Exception as error:  # as pika's reader: logged, then torn down
            import logging
            logging.getLogger("drivers.amqp.wire").exception(
                "reading the connection failed: %r", error)
            self.abort(error)
        return None

    cpdef take(self, data):
        """Bytes read from the socket."""
        cdef Py_ssize_t got, size
        feed = self.feed
        if feed is None:
            return self.on_data(data)
        transport, name = self.transport, self.size_attr
        got, size = len(data), getattr(transport, name)
        if got >= size and size < MAX_RECV_BYTES:
            setattr(transport, name, 2 * size)
        elif got < size // 4 and size > RECV_BYTES:
            setattr(transport, name, size // 2)
        try:
            taken, frames = feed(data)
        except Exception as error:
            from drivers.amqp.frames import FrameError
            if isinstance(error, FrameError):
                raise self.invalid_frame(str(error)) from None
            raise
        connection = self.connection
        connection.bytes_received += taken
        connection.frames_received += frames
        if self.after_read is not None:
            self.after_read()
        return None
