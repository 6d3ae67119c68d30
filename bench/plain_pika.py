"""Reference benchmark: the "plain pika loop".

One process, two threads, each with its own ``pika.BlockingConnection``:

* publisher thread: ``channel.basic_publish`` in a tight loop (default
  exchange, routing key = queue name, 2 KiB transient body);
* consumer thread: ``basic_qos(prefetch)`` + ``basic_consume`` +
  ``start_consuming`` (auto-ack by default).

The figure of merit is *delivered* messages per CPU-second of the whole
process (``time.process_time()`` covers every thread).  Publish rate, consume
rate and the queue backlog at the start and end of the measured window are
reported, so a publisher that outruns the consumer is visible.

Usage (against the members of a surge topology, ``surge up`` first; it connects as the
topology's generated user, what its provisioner's ``client_settings()`` gives)::

    python bench/plain_pika.py --topology local-1 --port 5680 --queue-type classic
    python bench/plain_pika.py --topology local-1 --port 5680 --queue-type quorum \
        --max-inflight 20000

Only talk to a broker on 127.0.0.1 / localhost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import pika

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a project dependency
    psutil = None

TRANSIENT = pika.BasicProperties(delivery_mode=1)
PERSISTENT = pika.BasicProperties(delivery_mode=2)

#: A broker user and password.
Credentials = tuple[str, str]


def topology_credentials(name: str) -> Credentials:
    """The user and password of the surge topology ``name`` (its provisioner's
    ``client_settings()``), from its state directory; ``ProvisionError`` if it was never
    provisioned."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from topologies.base import default_state_root
    from topologies.rabbitmq.credentials import read

    secrets = read(default_state_root() / name / "credentials.json")
    return secrets.user, secrets.password


def _params(host: str, port: int, credentials: Credentials) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        host=host,
        port=port,
        credentials=pika.PlainCredentials(*credentials),
        heartbeat=60,
        blocked_connection_timeout=30,
    )


def broker_process(port: int):
    """psutil.Process of the broker listening on 127.0.0.1:``port`` (or None)."""
    if psutil is None:
        return None
    try:
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                return psutil.Process(c.pid)
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        pass
    return None


def proc_cpu(proc) -> float:
    if proc is None:
        return float("nan")
    t = proc.cpu_times()
    return t.user + t.system


def declare_queue(
    host: str, port: int, queue: str, credentials: Credentials, queue_type: str = "classic"
) -> bool:
    """Make sure ``queue`` exists and is empty.

    An existing queue is only purged (its arguments are the caller's business);
    a missing one is declared with ``x-queue-type`` = ``queue_type`` (quorum
    queues durable).  Returns True when this call created the queue.
    """
    conn = pika.BlockingConnection(_params(host, port, credentials))
    try:
        ch = conn.channel()
        try:
            ch.queue_declare(queue, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 404:
                raise
            ch = conn.channel()
            ch.queue_declare(
                queue,
                durable=(queue_type == "quorum"),
                arguments={"x-queue-type": queue_type},
            )
            return True
        ch.queue_purge(queue)
        return False
    finally:
        conn.close()


def queue_depth(host: str, port: int, queue: str, credentials: Credentials) -> int:
    conn = pika.BlockingConnection(_params(host, port, credentials))
    try:
        return conn.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        conn.close()


def delete_queue(host: str, port: int, queue: str, credentials: Credentials) -> None:
    conn = pika.BlockingConnection(_params(host, port, credentials))
    try:
        conn.channel().queue_delete(queue)
    finally:
        conn.close()


def _consume(host: str, port: int, credentials: Credentials, queue: str, prefetch: int,
             on_message, auto_ack: bool, state: dict, ready: threading.Event,
             errors: list[BaseException]) -> None:
    """A consumer thread: consume ``queue`` until :func:`_stop_consuming` is called on
    ``state``; ``ready`` is set once it consumes (or has failed, into ``errors``)."""
    try:
        conn = pika.BlockingConnection(_params(host, port, credentials))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=prefetch)
        ch.basic_consume(queue, on_message, auto_ack=auto_ack)
        state["conn"], state["ch"] = conn, ch
        ready.set()
        ch.start_consuming()
        conn.close()
    except BaseException as exc:  # noqa: BLE001 - reported to caller
        errors.append(exc)
        ready.set()


def _stop_consuming(state: dict) -> None:
    """End a :func:`_consume` thread from another thread."""
    if "conn" in state:
        state["conn"].add_callback_threadsafe(state["ch"].stop_consuming)


def measure_plain_pika(
    host: str,
    port: int,
    queue: str,
    size: int = 2048,
    seconds: float = 10.0,
    warmup: float = 2.0,
    *,
    credentials: Credentials,
    queue_type: str = "classic",
    prefetch: int = 1000,
    auto_ack: bool = True,
    ack_every: int = 100,
    max_inflight: int | None = None,
    cleanup: bool = True,
    persistent: bool = False,
) -> dict:
    """Measure the plain BlockingConnection publisher+consumer pair.

    The queue is created if missing (``queue_type``) or purged if it exists;
    ``cleanup=True`` deletes it afterwards.

    ``max_inflight`` (None = unbounded tight loop, the reference) makes the
    publisher wait while ``published - received`` exceeds it, so the queue
    cannot grow without bound.  With ``auto_ack=False`` the consumer acks
    with ``multiple=True`` every ``ack_every`` messages. ``persistent`` publishes with
    delivery mode 2 (default 1, transient).

    Returns a dict with published, received, seconds, cpu_seconds,
    msgs_per_s, msgs_per_cpu_s, backlog (+ extra diagnostic keys).
    """
    declare_queue(host, port, queue, credentials, queue_type)
    body = os.urandom(size)
    stop = threading.Event()
    counters = {"pub": 0, "recv": 0}
    errors: list[BaseException] = []
    consumer_ready = threading.Event()
    consumer_state: dict = {}

    if auto_ack:

        def on_msg(_ch, _method, _props, _body):
            counters["recv"] += 1

    else:
        pending = [0]

        def on_msg(c, method, _props, _body):
            counters["recv"] += 1
            pending[0] += 1
            if pending[0] >= ack_every:
                c.basic_ack(method.delivery_tag, multiple=True)
                pending[0] = 0

    def publisher() -> None:
        try:
            conn = pika.BlockingConnection(_params(host, port, credentials))
            ch = conn.channel()
            publish = ch.basic_publish
            properties = PERSISTENT if persistent else TRANSIENT
            n = 0
            while not stop.is_set():
                if max_inflight is not None and n - counters["recv"] > max_inflight:
                    conn.sleep(0.0005)
                    continue
                publish("", queue, body, properties)
                n += 1
                counters["pub"] = n
            conn.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    tc = threading.Thread(target=_consume, name="plain-consumer", daemon=True, args=(
        host, port, credentials, queue, prefetch, on_msg, auto_ack, consumer_state,
        consumer_ready, errors))
    tc.start()
    consumer_ready.wait(30)
    tp = threading.Thread(target=publisher, name="plain-publisher", daemon=True)
    tp.start()

    broker = broker_process(port)
    time.sleep(warmup)
    d0 = queue_depth(host, port, queue, credentials)
    b0 = proc_cpu(broker)
    p0, r0, c0, t0 = counters["pub"], counters["recv"], time.process_time(), time.monotonic()
    time.sleep(seconds)
    p1, r1, c1, t1 = counters["pub"], counters["recv"], time.process_time(), time.monotonic()
    b1 = proc_cpu(broker)
    # queue depth while the load is still running (end of the window)
    d1 = queue_depth(host, port, queue, credentials)

    stop.set()
    tp.join(10)
    _stop_consuming(consumer_state)
    tc.join(10)
    # what the broker still holds after both sides stopped
    backlog_after_stop = queue_depth(host, port, queue, credentials)
    if cleanup:
        delete_queue(host, port, queue, credentials)
    if errors:
        raise RuntimeError(f"benchmark thread failed: {errors[0]!r}") from errors[0]

    wall, cpu = t1 - t0, c1 - c0
    received, published = r1 - r0, p1 - p0
    return {
        "variant": "plain_pika",
        "queue_type": queue_type,
        "published": published,
        "received": received,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "msgs_per_s": round(received / wall, 1),
        "publish_per_s": round(published / wall, 1),
        "msgs_per_cpu_s": round(received / cpu, 1) if cpu else None,
        "cpu_util": round(cpu / wall, 3),
        "backlog": d1,
        "backlog_at_start": d0,
        "backlog_growth": d1 - d0,
        "backlog_after_stop": backlog_after_stop,
        "inflight_at_end": p1 - r1,
        "broker_cpu_util": round((b1 - b0) / wall, 3),
        "prefetch": prefetch,
        "auto_ack": auto_ack,
        "max_inflight": max_inflight,
    }


def run_plain_rpc(host: str, port: int, queue: str, size: int, seconds: float, *,
                  credentials: Credentials, in_flight: int = 1, prefetch: int = 200,
                  persistent: bool = False) -> dict:
    """A plain pika request/reply pair for ``seconds``: a responder thread (``basic_consume``
    on ``queue``, each reply published to the request's ``reply_to`` with its correlation id,
    then the request acknowledged) and a requester thread (its own exclusive reply queue,
    ``in_flight`` requests outstanding, a new one sent for each reply whose correlation id it
    holds). Returns requests sent, replies matched and the process's CPU-seconds."""
    body = os.urandom(size)
    properties_mode = 2 if persistent else 1
    stop = threading.Event()
    counts = {"requests": 0, "replies": 0}
    errors: list[BaseException] = []
    ready = threading.Event()
    responder_state: dict = {}

    def on_request(c, method, props, request):
        c.basic_publish("", props.reply_to, request, pika.BasicProperties(
            delivery_mode=properties_mode, correlation_id=props.correlation_id))
        c.basic_ack(method.delivery_tag)

    def requester() -> None:
        try:
            conn = pika.BlockingConnection(_params(host, port, credentials))
            ch = conn.channel()
            reply_to = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
            waiting: set[str] = set()

            def send() -> None:
                correlation = str(counts["requests"])
                waiting.add(correlation)
                ch.basic_publish("", queue, body, pika.BasicProperties(
                    delivery_mode=properties_mode, reply_to=reply_to,
                    correlation_id=correlation))
                counts["requests"] += 1

            def on_reply(_c, _method, props, _body):
                if props.correlation_id in waiting:
                    waiting.discard(props.correlation_id)
                    counts["replies"] += 1
                    if not stop.is_set():
                        send()

            ch.basic_consume(reply_to, on_reply, auto_ack=True)
            for _ in range(in_flight):
                send()
            while not stop.is_set():
                conn.process_data_events(time_limit=0.1)
            conn.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    started_cpu = time.process_time()
    tr = threading.Thread(target=_consume, name="plain-responder", daemon=True, args=(
        host, port, credentials, queue, prefetch, on_request, False, responder_state, ready,
        errors))
    tr.start()
    ready.wait(30)
    tq = threading.Thread(target=requester, name="plain-requester", daemon=True)
    tq.start()
    stop.wait(seconds)
    stop.set()
    tq.join(10)
    _stop_consuming(responder_state)
    tr.join(10)
    if errors:
        raise RuntimeError(f"benchmark thread failed: {errors[0]!r}") from errors[0]
    return {"published": counts["requests"], "received": counts["replies"],
            "cpu_seconds": round(time.process_time() - started_cpu, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True, help="the surge topology (its credentials)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5680)
    ap.add_argument("--queue", default=None)
    ap.add_argument("--queue-type", default="classic", choices=["classic", "quorum"])
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--prefetch", type=int, default=1000)
    ap.add_argument("--manual-ack", action="store_true")
    ap.add_argument("--ack-every", type=int, default=100)
    ap.add_argument("--max-inflight", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("loopback only")
    try:
        credentials = topology_credentials(a.topology)
    except Exception as error:  # ProvisionError: missing or damaged state  # noqa: BLE001
        ap.error(str(error))
    res = measure_plain_pika(
        a.host,
        a.port,
        a.queue or f"bench.plain.{a.queue_type}",
        size=a.size,
        seconds=a.seconds,
        warmup=a.warmup,
        queue_type=a.queue_type,
        prefetch=a.prefetch,
        auto_ack=not a.manual_ack,
        ack_every=a.ack_every,
        max_inflight=a.max_inflight,
        credentials=credentials,
    )
    if a.json:
        print(json.dumps(res))
        return
    print(
        f"plain_pika {res['queue_type']}: received {res['received']} in {res['seconds']}s "
        f"-> {res['msgs_per_s']:.0f} msg/s, published {res['publish_per_s']:.0f} msg/s, "
        f"cpu {res['cpu_seconds']}s ({res['cpu_util'] * 100:.0f}% of a core) "
        f"-> {res['msgs_per_cpu_s']:.0f} msgs/CPU-s, backlog {res['backlog_at_start']}"
        f"->{res['backlog']} (broker cpu {res['broker_cpu_util'] * 100:.0f}%)"
    )


if __name__ == "__main__":
    main()
