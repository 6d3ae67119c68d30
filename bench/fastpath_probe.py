"""Probe cheaper ways to publish/consume with pika 1.4.x than the plain loop.

Every variant runs ONE publisher connection and ONE consumer connection on a
single ``pika.SelectConnection`` IOLoop (``custom_ioloop``) in one thread, with
a credit window: the publisher only publishes while
``published - received < window``, so the queue cannot grow without bound
and the fair figure (delivered messages / process CPU-second) is not inflated
by messages that pile up in the broker.

Publisher variants (``--case`` = ``<pub>+<con>``):

  pika        channel.basic_publish, ``batch`` messages per ioloop callback
  coalesce    channel.basic_publish, but the frames pika emits during one
              batch are captured and handed to the transport as ONE write
  pre1        pre-encoded Basic.Publish method frame + content header frame
              (built once with pika.frame/pika.spec); per message one
              transport write of prefix + body frame (type 3 ... 0xCE)
  pre         as pre1, but a whole batch of messages in ONE transport write
  preseq      as pre, and every message gets a distinct first 24 bytes
              (seq:uint64, time_ns:uint64, worker:uint64) written per message

Consumer variants:

  auto        basic_consume(auto_ack=True), pika's normal frame decoding
  ack         basic_consume(auto_ack=False), basic_ack(multiple=True) every N
  autobig     auto + larger socket reads (transport._MAX_RECV_BYTES)
  fast        auto-ack, Basic.Deliver/header/body frames parsed by a small
              offset-based decoder installed as connection._on_data_available
              (all other frames are handed back to pika), large reads
  fastack     fast decoder + manual multiple-ack every N
  fastlat     fastack + decode the 24-byte header per message (latency stats)

Usage::

    python bench/fastpath_probe.py --topology local-1 --port 5680          # full table
    python bench/fastpath_probe.py --topology local-1 --port 5680 --case pre+fast \
        --queue-type quorum --json
    py-spy record -o prof.txt --format raw -- \
        python bench/fastpath_probe.py --topology local-1 --port 5680 --case pika+auto --inproc

Loopback only, against the members of a surge topology (``surge up`` first), as its generated
user (the provisioner's ``client_settings()``).  Every case is bounded by --warmup + --seconds
(+ a few s).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time

import pika
from pika import frame, spec
from pika.adapters.select_connection import IOLoop

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plain_pika import (  # noqa: E402
    Credentials,
    broker_process,
    declare_queue,
    delete_queue,
    measure_plain_pika,
    proc_cpu,
    queue_depth,
    topology_credentials,
)

TRANSIENT = pika.BasicProperties(delivery_mode=1)
_BASIC_DELIVER = spec.Basic.Deliver.INDEX  # 0x003C003C
_FRAME_HDR = struct.Struct(">BHI")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_SEQHDR = struct.Struct(">QQQ")  # 24-byte per-message header: seq, time_ns, worker


# --------------------------------------------------------------------------
# Hook 1 (publisher): pre-encoded frames written straight to the transport
# --------------------------------------------------------------------------
def encode_publish(
    channel_number: int,
    exchange: str,
    routing_key: str,
    body: bytes,
    properties: spec.BasicProperties = TRANSIENT,
    frame_max: int = 131072,
) -> tuple[bytes, int]:
    """Wire bytes of one complete Basic.Publish (method + header + body frames).

    Returns (bytes, offset_of_body_in_bytes).  Bodies larger than one frame are
    split exactly like ``Connection._send_message`` does.
    """
    method = frame.Method(
        channel_number, spec.Basic.Publish(exchange=exchange, routing_key=routing_key)
    ).marshal()
    header = frame.Header(channel_number, len(body), properties).marshal()
    max_chunk = frame_max - spec.FRAME_HEADER_SIZE - spec.FRAME_END_SIZE
    parts = [method, header]
    for start in range(0, len(body), max_chunk):
        chunk = body[start : start + max_chunk]
        parts.append(_FRAME_HDR.pack(spec.FRAME_BODY, channel_number, len(chunk)))
        parts.append(chunk)
        parts.append(b"\xce")
    # offset of the first body byte (first body frame header is 7 bytes)
    return b"".join(parts), len(method) + len(header) + spec.FRAME_HEADER_SIZE


def emit_raw(connection: pika.connection.Connection, data: bytes) -> None:
    """Hand already-framed bytes to pika's transport (ioloop thread only).

    ``Connection._adapter_emit_data`` (connection.py:1540, implemented in
    adapters/base_connection.py:414 as ``self._transport.write(data)``) is the
    narrowest hook that every pika adapter implements.
    """
    connection._adapter_emit_data(data)  # pylint: disable=protected-access


# --------------------------------------------------------------------------
# Hook 2 (consumer): offset-based decoder for Basic.Deliver content
# --------------------------------------------------------------------------
def install_fast_consumer(
    connection,
    channel_number: int,
    on_message,
    on_chunk_end=None,
    recv_bytes: int = 262144,
    on_chunk_start=None,
) -> None:
    """Replace ``connection._on_data_available`` with a decoder that handles
    Basic.Deliver + content header + body frames for ``channel_number`` itself
    and hands every other frame to pika's ``Connection._process_frame``.

    ``on_message(delivery_tag, body)`` is called per message;
    ``on_chunk_start()`` / ``on_chunk_end()`` once per socket read.
    """
    from pika.frame import decode_frame

    process_frame = connection._process_frame  # pylint: disable=protected-access
    unpack_hdr = _FRAME_HDR.unpack_from
    unpack_u32 = _U32.unpack_from
    unpack_u64 = _U64.unpack_from
    # decoder state, kept in a list for speed + mutability
    leftover = b""
    tag = 0
    remaining = -1  # >0: body bytes still expected for current delivery
    parts: list = []
    passthrough = set()  # channels whose current content goes to pika

    def on_data_available(data: bytes) -> None:
        nonlocal leftover, tag, remaining, parts
        if on_chunk_start is not None:
            on_chunk_start()
        buf = leftover + data if leftover else data
        n = len(buf)
        pos = 0
        while n - pos >= 7:
            ftype, ch, size = unpack_hdr(buf, pos)
            end = pos + 8 + size
            if end > n:
                break
            if buf[end - 1] != 0xCE:
                raise pika.exceptions.InvalidFrameError("Invalid FRAME_END marker")
            if ch == channel_number and ch not in passthrough:
                if ftype == 3 and remaining > 0:
                    if size == remaining and not parts:
                        remaining = -1
                        on_message(tag, buf[pos + 7 : end - 1])
                    else:
                        parts.append(buf[pos + 7 : end - 1])
                        remaining -= size
                        if remaining == 0:
                            remaining = -1
                            body, parts = b"".join(parts), []
                            on_message(tag, body)
                    pos = end
                    continue
                if ftype == 2 and remaining == 0:
                    # content header: class(2) weight(2) body_size(8) ...
                    remaining = unpack_u64(buf, pos + 11)[0]
                    if remaining == 0:
                        remaining = -1
                        on_message(tag, b"")
                    pos = end
                    continue
                if ftype == 1 and unpack_u32(buf, pos + 7)[0] == _BASIC_DELIVER:
                    # consumer_tag shortstr, delivery_tag u64, redelivered, ...
                    ctag_len = buf[pos + 11]
                    tag = unpack_u64(buf, pos + 12 + ctag_len)[0]
                    remaining = 0  # waiting for the header frame
                    pos = end
                    continue
            # ---- anything else: let pika handle it --------------------------
            _consumed, fv = decode_frame(buf[pos:end])
            pos = end
            if fv is None:
                raise pika.exceptions.InvalidFrameError("undecodable frame")
            if ftype == 1 and spec.has_content(fv.method.INDEX):
                passthrough.add(ch)
            elif ftype == 2 and ch in passthrough and fv.body_size == 0:
                passthrough.discard(ch)
            elif ftype == 3 and ch in passthrough:
                # pika's assembler finishes when it has body_size bytes; we only
                # need to know when to stop passing through: after last body
                # frame the assembler is reset (its _method_frame is None)
                chan = connection._channels.get(ch)  # pylint: disable=protected-access
                process_frame(fv)
                if chan is None or chan._content_assembler._method_frame is None:
                    passthrough.discard(ch)
                continue
            process_frame(fv)
        leftover = buf[pos:] if pos < n else b""
        if on_chunk_end is not None:
            on_chunk_end()

    connection._on_data_available = on_data_available  # pylint: disable=protected-access
    set_recv_size(connection, recv_bytes)


def set_recv_size(connection, recv_bytes: int) -> None:
    """Bigger socket reads: ``_AsyncTransportBase._MAX_RECV_BYTES`` is 4096
    (adapters/utils/io_services_utils.py:743) and ``_MAX_CONSUME_BYTES`` 100 KiB
    per readable event (:746).  Instance attributes shadow the class ones."""
    t = connection._transport  # pylint: disable=protected-access
    t._MAX_RECV_BYTES = recv_bytes
    t._MAX_CONSUME_BYTES = max(recv_bytes * 4, 1 << 20)


# --------------------------------------------------------------------------
# The single-ioloop harness
# --------------------------------------------------------------------------
class Case:
    def __init__(
        self,
        host,
        port,
        queue,
        queue_type,
        pub,
        con,
        credentials: Credentials,
        size=2048,
        batch=200,
        window=5000,
        prefetch=1000,
        ack_every=200,
        seconds=10.0,
        warmup=2.0,
        rate=0.0,
        tick=0.005,
        pace=0.0,
    ):
        self.host, self.port, self.queue, self.queue_type = host, port, queue, queue_type
        self.credentials = credentials
        self.pub_mode, self.con_mode = pub, con
        self.size, self.batch, self.window = size, batch, window
        self.prefetch, self.ack_every = prefetch, ack_every
        self.seconds, self.warmup = seconds, warmup
        self.rate, self.tick = rate, tick  # rate 0 = as fast as the window allows
        self.pace = pace  # >0: at most one loop pass per `pace` s
        self.loop_done = False
        self.rate_t0 = self.rate_n0 = 0
        self.next_seq = 0
        self.seq_errors = 0
        self.body_errors = 0
        self.body = os.urandom(size)
        self.published = 0
        self.received = 0
        self.waiting = False
        self.pump_scheduled = False
        self.stopping = False
        self.lat_sum = 0
        self.lat_n = 0
        self.lat_max = 0
        self.errors: list = []
        self.ioloop = IOLoop()
        self.pub_conn = self.con_conn = None
        self.pub_ch = self.con_ch = None
        self.ready = 0
        self.snap: dict = {}
        self.depth: dict = {}
        self.broker = broker_process(port)

    # ---------------- setup ----------------
    def params(self):
        return pika.ConnectionParameters(
            host=self.host,
            port=self.port,
            credentials=pika.PlainCredentials(*self.credentials),
            heartbeat=60,
        )

    def run(self) -> dict:
        declare_queue(self.host, self.port, self.queue, self.credentials, self.queue_type)
        self.pub_conn = pika.SelectConnection(
            self.params(),
            on_open_callback=self._pub_open,
            on_open_error_callback=self._fail,
            custom_ioloop=self.ioloop,
        )
        self.con_conn = pika.SelectConnection(
            self.params(),
            on_open_callback=self._con_open,
            on_open_error_callback=self._fail,
            custom_ioloop=self.ioloop,
        )
        self.ioloop.call_later(self.warmup + self.seconds + 30, self._watchdog)
        if self.pace:
            self._run_paced()
        else:
            self.ioloop.start()
        backlog_after_stop = queue_depth(self.host, self.port, self.queue, self.credentials)
        delete_queue(self.host, self.port, self.queue, self.credentials)
        if self.errors:
            raise RuntimeError(f"case failed: {self.errors[0]!r}")
        s0, s1 = self.snap["t0"], self.snap["t1"]
        wall, cpu = s1[3] - s0[3], s1[2] - s0[2]
        bcpu = s1[4] - s0[4]
        recv, pubd = s1[1] - s0[1], s1[0] - s0[0]
        res = {
            "variant": f"{self.pub_mode}+{self.con_mode}",
            "queue_type": self.queue_type,
            "published": pubd,
            "received": recv,
            "seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 3),
            "msgs_per_s": round(recv / wall, 1),
            "publish_per_s": round(pubd / wall, 1),
            "msgs_per_cpu_s": round(recv / cpu, 1) if cpu else None,
            "cpu_util": round(cpu / wall, 3),
            "backlog": self.depth.get("t1", -1),
            "backlog_at_start": self.depth.get("t0", -1),
            "backlog_growth": self.depth.get("t1", 0) - self.depth.get("t0", 0),
            "backlog_after_stop": backlog_after_stop,
            "inflight_at_end": s1[0] - s1[1],
            "broker_cpu_util": round(bcpu / wall, 3),
            "batch": self.batch,
            "window": self.window,
            "rate": self.rate,
            "pace": self.pace,
            "prefetch": self.prefetch,
            "ack_every": self.ack_every,
        }
        if self.con_mode == "fastlat":
            res["seq_errors"], res["body_errors"] = self.seq_errors, self.body_errors
        if self.lat_n:
            res["lat_mean_ms"] = round(self.lat_sum / self.lat_n / 1e6, 2)
            res["lat_max_ms"] = round(self.lat_max / 1e6, 2)
        return res

    def _run_paced(self):
        """Drive the IOLoop ourselves (IOLoop.poll/process_timeouts are pika's
        "[Extension]" API) and sleep out the rest of each `pace` tick, so
        socket data accumulates and every wake-up handles many messages."""
        ioloop, pace = self.ioloop, self.pace
        ioloop.activate_poller()
        try:
            while not self.loop_done:
                t = time.monotonic()
                ioloop.poll()
                ioloop.process_timeouts()
                left = pace - (time.monotonic() - t)
                if left > 0:
                    time.sleep(left)
        finally:
            ioloop.deactivate_poller()

    def _stop_loop(self):
        self.loop_done = True
        self.ioloop.stop()

    def _fail(self, _conn, err):
        self.errors.append(err)
        self._stop_loop()

    def _watchdog(self):
        self.errors.append(TimeoutError("case did not finish in time"))
        self._stop_loop()

    def _pub_open(self, conn):
        conn.channel(on_open_callback=self._pub_ch_open)

    def _con_open(self, conn):
        conn.channel(on_open_callback=self._con_ch_open)

    def _pub_ch_open(self, ch):
        self.pub_ch = ch
        if self.pub_mode in ("pre", "pre1", "preseq"):
            frame_max = self.pub_conn.params.frame_max
            self.msg, self.body_off = encode_publish(
                ch.channel_number, "", self.queue, self.body, TRANSIENT, frame_max
            )
            self.stride = len(self.msg)
        self._maybe_start()

    def _con_ch_open(self, ch):
        self.con_ch = ch
        ch.basic_qos(prefetch_count=self.prefetch, callback=self._qos_ok)

    def _qos_ok(self, _frame):
        ch, mode = self.con_ch, self.con_mode
        manual = mode in ("ack", "fastack", "fastlat")
        if mode in ("auto", "ack", "autobig"):
            if mode == "autobig":
                set_recv_size(self.con_conn, 262144)
            cb = self._on_pika_msg_ack if manual else self._on_pika_msg
        else:
            cb = self._never  # deliveries are intercepted by the fast decoder
            on_msg = {
                "fast": self._on_fast_msg,
                "fastack": self._on_fast_msg_ack,
                "fastlat": self._on_fast_msg_lat,
            }[mode]
            install_fast_consumer(
                self.con_conn,
                ch.channel_number,
                on_msg,
                on_chunk_end=self._on_chunk_end,
                on_chunk_start=self._on_chunk_start if mode == "fastlat" else None,
            )
        ch.basic_consume(
            self.queue, cb, auto_ack=not manual, callback=lambda _f: self._maybe_start()
        )

    def _never(self, *_a):
        raise AssertionError("fast decoder missed a delivery")

    def _maybe_start(self):
        self.ready += 1
        if self.ready < 2:
            return
        self.ioloop.call_later(self.warmup, self._start_window)
        self.ioloop.call_later(self.warmup + self.seconds, self._finish)
        self.rate_t0, self.rate_n0 = time.monotonic(), self.published
        self._schedule_pump()

    def _snapshot(self, key):
        self.snap[key] = (
            self.published,
            self.received,
            time.process_time(),
            time.monotonic(),
            proc_cpu(self.broker),
        )

    def _queue_depth(self, key, then=None):
        def ok(fr):
            self.depth[key] = fr.method.message_count
            if then:
                then()

        self.pub_ch.queue_declare(self.queue, passive=True, callback=ok)

    def _start_window(self):
        self._snapshot("t0")
        self._queue_depth("t0")

    def _finish(self):
        self._snapshot("t1")
        # depth while the consumer is still running, then stop everything
        self._queue_depth("t1", then=self._close)
        self.ioloop.call_later(5.0, self._close)  # in case the reply never comes

    def _close(self):
        if self.stopping:
            return
        self.stopping = True
        if self.con_ch is not None and self.con_mode in ("ack", "fastack", "fastlat"):
            self.con_ch.basic_ack(0, multiple=True)
        self.pub_conn.close()
        self.con_conn.close()
        self.ioloop.call_later(1.0, self._stop_loop)

    # ---------------- publisher ----------------
    def _schedule_pump(self):
        if not self.pump_scheduled:
            self.pump_scheduled = True
            self.ioloop.call_later(0, self._pump)

    def _pump(self):
        self.pump_scheduled = False
        if self.stopping:
            return
        credit = self.window - (self.published - self.received)
        if credit < self.batch:
            self.waiting = True  # consumer will kick us
            return
        n = self.batch
        if self.rate:
            # token bucket: what the schedule allows so far, at most one batch
            due = int((time.monotonic() - self.rate_t0) * self.rate) - (
                self.published - self.rate_n0
            )
            if due <= 0:
                self.pump_scheduled = True
                self.ioloop.call_later(self.tick, self._pump)
                return
            n = min(n, due)
        getattr(self, "_pub_" + self.pub_mode)(n)
        self.published += n
        if self.rate and n < self.batch:
            self.pump_scheduled = True
            self.ioloop.call_later(self.tick, self._pump)
        else:
            self._schedule_pump()

    def _kick(self):
        if self.waiting and self.window - (self.published - self.received) >= self.batch:
            self.waiting = False
            self._schedule_pump()

    def _pub_pika(self, n):
        publish, q, body = self.pub_ch.basic_publish, self.queue, self.body
        for _ in range(n):
            publish("", q, body, TRANSIENT)

    def _pub_coalesce(self, n):
        conn = self.pub_conn
        captured: list = []
        conn._adapter_emit_data = captured.append  # capture pika's 3 frames/msg
        try:
            publish, q, body = self.pub_ch.basic_publish, self.queue, self.body
            for _ in range(n):
                publish("", q, body, TRANSIENT)
        finally:
            del conn._adapter_emit_data  # back to the class method
        conn._adapter_emit_data(b"".join(captured))

    def _pub_pre1(self, n):
        emit, msg = self.pub_conn._adapter_emit_data, self.msg
        for _ in range(n):
            emit(msg)

    def _pub_pre(self, n):
        self.pub_conn._adapter_emit_data(self.msg * n)

    def _pub_preseq(self, n):
        buf = bytearray(self.msg * n)  # fresh buffer: the transport owns it
        pack_into, stride, off = _SEQHDR.pack_into, self.stride, self.body_off
        seq, now_ns = self.published, time.time_ns
        for i in range(n):
            pack_into(buf, off + i * stride, seq + i, now_ns(), 7)
        self.pub_conn._adapter_emit_data(bytes(buf))

    # ---------------- consumers ----------------
    def _on_pika_msg(self, _ch, _method, _props, _body):
        self.received += 1
        if self.waiting:
            self._kick()

    def _on_pika_msg_ack(self, ch, method, _props, _body):
        self.received += 1
        if self.received % self.ack_every == 0:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if self.waiting:
            self._kick()

    def _on_fast_msg(self, _tag, _body):
        self.received += 1

    def _on_fast_msg_ack(self, tag, _body):
        self.received += 1
        if self.received % self.ack_every == 0 and not self.stopping:
            self.con_ch.basic_ack(tag, multiple=True)

    def _on_fast_msg_lat(self, tag, body):
        self.received += 1
        seq, ts, _w = _SEQHDR.unpack_from(body)
        if seq != self.next_seq:
            self.seq_errors += 1
        self.next_seq = seq + 1
        if not seq & 1023 and body[24:] != self.body[24:]:
            self.body_errors += 1
        lat = self._chunk_now - ts
        self.lat_sum += lat
        self.lat_n += 1
        if lat > self.lat_max:
            self.lat_max = lat
        if self.received % self.ack_every == 0 and not self.stopping:
            self.con_ch.basic_ack(tag, multiple=True)

    _chunk_now = 0

    def _on_chunk_start(self):
        self._chunk_now = time.time_ns()  # one clock read per socket read

    def _on_chunk_end(self):
        if self.waiting:
            self._kick()


def run_case(host, port, queue_type, case, credentials: Credentials, **kw) -> dict:
    queue = f"bench.fast.{queue_type}"
    if case == "plain":
        if kw.get("rate"):
            raise ValueError("plain case has no rate control")
        r = measure_plain_pika(
            host,
            port,
            queue,
            queue_type=queue_type,
            size=kw.get("size", 2048),
            seconds=kw.get("seconds", 10.0),
            warmup=kw.get("warmup", 2.0),
            prefetch=kw.get("prefetch", 1000),
            credentials=credentials,
        )
        r["variant"] = "plain"
        return r
    pub, con = case.split("+")
    return Case(host, port, queue, queue_type, pub, con, credentials, **kw).run()


DEFAULT_CASES = [
    "plain",
    "pika+auto",
    "pika+ack",
    "coalesce+auto",
    "pre1+auto",
    "pre+auto",
    "pre+autobig",
    "pre+ack",
    "pre+fast",
    "pre+fastack",
    "preseq+fastlat",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True, help="the surge topology (its credentials)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5680)
    ap.add_argument("--queue-type", default="classic,quorum")
    ap.add_argument("--case", default=",".join(DEFAULT_CASES))
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--window", type=int, default=5000)
    ap.add_argument("--prefetch", type=int, default=1000)
    ap.add_argument("--ack-every", type=int, default=200)
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="target publish rate msg/s (0 = unthrottled, window-bound)",
    )
    ap.add_argument("--tick", type=float, default=0.005, help="rate-control timer, s")
    ap.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="drive the ioloop at most once per PACE s (0 = ioloop.start())",
    )
    ap.add_argument(
        "--inproc", action="store_true", help="run cases in this process (for profilers)"
    )
    ap.add_argument("--json", action="store_true", help="one JSON line per case")
    a = ap.parse_args()
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("loopback only")
    try:
        credentials = topology_credentials(a.topology)
    except Exception as error:  # ProvisionError: missing or damaged state  # noqa: BLE001
        ap.error(str(error))
    kw = dict(
        size=a.size,
        seconds=a.seconds,
        warmup=a.warmup,
        batch=a.batch,
        window=a.window,
        prefetch=a.prefetch,
        ack_every=a.ack_every,
        rate=a.rate,
        tick=a.tick,
        pace=a.pace,
    )
    rows = []
    for qt in a.queue_type.split(","):
        for case in a.case.split(","):
            if a.inproc or (len(a.case.split(",")) == 1 and "," not in a.queue_type):
                r = run_case(a.host, a.port, qt, case, credentials, **kw)
            else:  # isolate every case in a fresh interpreter
                cmd = [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--json",
                    "--inproc",
                    "--topology",
                    a.topology,
                    "--host",
                    a.host,
                    "--port",
                    str(a.port),
                    "--queue-type",
                    qt,
                    "--case",
                    case,
                ] + [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
                out = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=a.warmup + a.seconds + 60
                )
                if out.returncode != 0:
                    print(f"{qt} {case}: FAILED\n{out.stderr[-2000:]}", file=sys.stderr)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            if a.json:
                print(json.dumps(r), flush=True)
    if a.json:
        return
    base = {r["queue_type"]: r["msgs_per_cpu_s"] for r in rows if r["variant"] == "plain"}
    hdr = (
        f"{'queue':7} {'variant':16} {'recv/s':>8} {'pub/s':>8} {'cpu%':>5} "
        f"{'msg/CPU-s':>10} {'x plain':>7} {'backlog':>7}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        b = base.get(r["queue_type"])
        x = f"{r['msgs_per_cpu_s'] / b:.2f}" if b else "-"
        print(
            f"{r['queue_type']:7} {r['variant']:16} {r['msgs_per_s']:8.0f} "
            f"{r['publish_per_s']:8.0f} {r['cpu_util'] * 100:5.0f} "
            f"{r['msgs_per_cpu_s']:10.0f} {x:>7} {r['backlog']:7d}"
        )


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("fastpath_probe"):
        main()
