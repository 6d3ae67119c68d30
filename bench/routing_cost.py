"""What routing keys and variable sizes cost the publishing fast path: one surge agent (1 sender,
1 receiver, 2 KiB, unlimited rate) publishing to the default exchange, then to a direct exchange
with one key, with 4 keys picked at random per message and with 100 keys from a Zipf
distribution, every key bound to the same queue (so each message is delivered once and the
cases differ only in publishing); then sizes of the same 2 KiB mean picked per message, as a
weighted mix of 3 sizes and as a uniform range in 16 classes (with the 100 Zipf keys), and JSON
bodies with AMQP properties.

The cases alternate over ``--rounds`` rounds on one local member; per case it prints the median
delivered msg/s and delivered messages per agent CPU-second, and their ratio to the default
exchange's in the same round (the median of the rounds' ratios). The target: at least 0.9.
Unlimited, a case the broker routes more slowly also delivers fewer messages over the agent's
fixed costs (its loop, its timers); ``--rate`` holds every case at the same msg/s, so the ratio
is the publishing cost alone.

    .venv/bin/python bench/routing_cost.py [--rounds 3] [--seconds 8] [--rate 15000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.driver_efficiency import measure_agent  # noqa: E402
from drivers import protocol  # noqa: E402
from orchestrator.specs.topology import TopologySpec  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

QUEUE, EXCHANGE = "rc-queue", "rc-direct"
KEYS = [f"key-{i}" for i in range(1, 101)]
ZIPF = {"exchange": EXCHANGE, "routing_keys": tuple(KEYS), "key_order": "zipf"}
CASES = {
    "default exchange": {},
    "exchange, 1 key": {"exchange": EXCHANGE, "routing_keys": ("key-1",)},
    "exchange, 4 keys random": {"exchange": EXCHANGE, "routing_keys": tuple(KEYS[:4]),
                                "key_order": "random"},
    "exchange, 100 keys zipf": ZIPF,
    "3 sizes, mean 2 KiB": {"message": protocol.MessageShape(
        sizes=(1024, 2048, 3072), weights=(1.0, 1.0, 1.0))},
    "16 sizes + 100 zipf keys": {**ZIPF, "message": protocol.MessageShape(
        sizes=tuple(1024 + 2048 * i // 15 for i in range(16)), weights=(1.0,) * 16)},
    "JSON + properties": {"message": protocol.MessageShape(
        sizes=(2048,), fill="json", properties={"content_type": "application/json",
                                                "headers": {"kind": "order"}})},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=0.0, help="msg/s of the sender in every "
                                                                "case (0: unlimited)")
    args = parser.parse_args()
    topology = TopologySpec.model_validate({
        "name": "bench-routing", "members": 1, "start": 1, "port_base": 7420,
        "queues": [{"name": QUEUE}], "exchanges": [{"name": EXCHANGE}],
        "bindings": [{"exchange": EXCHANGE, "queue": QUEUE, "routing_key": key}
                     for key in KEYS]})
    provisioner = LocalRabbitMQ(topology)
    figures: dict[str, list[dict]] = {name: [] for name in CASES}
    try:
        (member,) = [m for m in provisioner.up() if m.running]
        api, settings = provisioner.management(), provisioner.client_settings()
        for round_ in range(args.rounds):
            for name, destination in CASES.items():
                figures[name].append(measure_agent(member.endpoint, QUEUE, args.seconds,
                                                   args.warmup, settings, rate=args.rate,
                                                   **destination))
                api.request("DELETE", f"/queues/%2F/{QUEUE}/contents")
                print(f"round {round_ + 1} {name:26} "
                      f"{figures[name][-1]['msgs_per_cpu_s']:>10,.0f} msg per CPU-s", flush=True)
    finally:
        provisioner.down()
    base = figures["default exchange"]
    print(f"\n{'case':26} {'delivered msg/s':>16} {'msg per CPU-s':>14} {'ratio':>6}")
    for name, runs in figures.items():
        ratio = statistics.median(r["msgs_per_cpu_s"] / b["msgs_per_cpu_s"]
                                  for r, b in zip(runs, base))
        print(f"{name:26} {statistics.median(r['msgs_per_s'] for r in runs):>16,.0f} "
              f"{statistics.median(r['msgs_per_cpu_s'] for r in runs):>14,.0f} {ratio:>6.2f}")


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("routing_cost"):
        main()
