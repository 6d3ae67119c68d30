"""How fast the receiving fast path decodes deliveries: the current decoder against the one of
an earlier revision, in the same process, on the same bytes. No broker, no socket.

A stream of ``--messages`` deliveries of ``--size``-byte bodies (as RabbitMQ sends them, built
with pika's own encoder) is fed to each decoder in reads of ``--read`` bytes, through the path a
connection's readable event takes (``install_decoder``'s ``_on_data_available`` on a stand-in
connection). The variants alternate, ``--rounds`` times; each one's best round is reported as
ns per delivery, and its ratio to the old one as the median of the rounds' ratios (each
round's variants ran back to back, so a machine that others load alike for both cancels out;
below 1: faster than the old one). Beside them: the pure-Python reference decoder
(``PyFrameDecoder``), and the decoder with a plain receiver's accounting of each delivery (on
the compiled core, or on the pure one with ``SURGE_SPEEDUPS=0``: the old revision's adapter
loads today's decoder too, so the pure figures need that run).

    .venv/bin/python bench/decoder_speed.py --old a783b57
    SURGE_SPEEDUPS=0 .venv/bin/python bench/decoder_speed.py --old a783b57
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

from pika import frame, spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drivers.amqp import wire  # noqa: E402
from drivers.amqp.frames import FrameDecoder, PyFrameDecoder  # noqa: E402
from drivers.header import encode  # noqa: E402
from drivers.workers import ReceiverRole, Recorder  # noqa: E402
from results.rundir import compiled  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Connection:
    """What a decoder touches on a pika connection: counters, _process_frame, transport."""

    class Transport:
        _MAX_RECV_BYTES = 65536

    def __init__(self):
        self.bytes_received = self.frames_received = 0
        self._transport = self.Transport()
        self._on_data_available = None

    def _process_frame(self, value):
        self.frames_received += 1


def stream(messages: int, size: int) -> bytes:
    """``messages`` deliveries on channel 1 with a heartbeat every 1,000."""
    parts = []
    for seq in range(messages):
        deliver = spec.Basic.Deliver(consumer_tag="ctag1.0123456789abcdef", delivery_tag=seq + 1,
                                     exchange="", routing_key="perf")
        body = encode(1, seq, 1, None) + bytes(size - 28)
        parts += [frame.Method(1, deliver).marshal(),
                  frame.Header(1, size, spec.BasicProperties(delivery_mode=1)).marshal(),
                  frame.Body(1, body).marshal()]
        if seq % 1000 == 999:
            parts.append(frame.Heartbeat().marshal())
    return b"".join(parts)


def old_wire(revision: str) -> types.ModuleType:
    """drivers/amqp/wire.py as it was at ``revision``, loaded as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:drivers/amqp/wire.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(f"wire_{revision}")
    exec(compile(source, f"{revision}:drivers/amqp/wire.py", "exec"), module.__dict__)
    return module


def run_once(install, reads: list[bytes], messages: int) -> float:
    """Seconds to feed ``reads`` through a fresh decoder; checks every delivery came out."""
    got = [0]

    def delivered(buffer, offset, tag, redelivered):
        got[0] += 1

    connection = Connection()
    install(connection, 1, delivered)
    feed = connection._on_data_available
    start = time.perf_counter()
    for data in reads:
        feed(data)
    elapsed = time.perf_counter() - start
    if got[0] != messages:
        raise SystemExit(f"{install.__module__}: {got[0]} deliveries of {messages}")
    return elapsed


def bare(connection, channel_number, on_delivery, decoder=FrameDecoder) -> None:
    """FrameDecoder.feed alone, without the adapter's counters and read sizes."""
    connection._on_data_available = decoder(channel_number, on_delivery, lambda raw: None).feed


def pure_bare(connection, channel_number, on_delivery) -> None:
    """The pure-Python reference decoder's feed alone."""
    bare(connection, channel_number, on_delivery, PyFrameDecoder)


def accounted(connection, channel_number, on_delivery) -> None:
    """wire.install_decoder with a receiver's accounting of each delivery (header, sequence,
    two latency records, counts), as a plain receiver does."""
    on_body = ReceiverRole(Recorder()).on_body

    def delivered(buffer, offset, tag, redelivered):
        on_body(buffer, offset, redelivered)
        on_delivery(buffer, offset, tag, redelivered)
    wire.install_decoder(connection, channel_number, delivered)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="a783b57", help="git revision of the earlier decoder")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=2048, help="body bytes")
    parser.add_argument("--read", type=int, default=wire.RECV_BYTES, help="bytes per read")
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    data = stream(args.messages, args.size)
    reads = [data[i:i + args.read] for i in range(0, len(data), args.read)]
    variants = {f"old ({args.old})": old_wire(args.old).install_decoder,
                "new (wire.install_decoder)": wire.install_decoder,
                "new FrameDecoder.feed alone": bare,
                "pure FrameDecoder.feed alone": pure_bare,
                "new + receiver accounting": accounted}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, install in variants.items():
            times[name].append(run_once(install, reads, args.messages))
    print(f"python {sys.version.split()[0]}, {args.messages:,} deliveries of {args.size} B in "
          f"{len(reads):,} reads of {args.read:,} B, {args.rounds} rounds; hot path: "
          f"{compiled.state()}")
    old = times[next(iter(variants))]
    for name, seconds in times.items():
        ratio = statistics.median(t / o for t, o in zip(seconds, old))
        print(f"  {name:30s} best {min(seconds) * 1e9 / args.messages:7.1f} ns/delivery  "
              f"median ratio to old x{ratio:.3f}")


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("decoder_speed"):
        main()
