"""Driver efficiency: one surge agent (1 sender + 1 receiver, 2 KiB, non-persistent, unlimited
rate) against a plain pika publish/consume loop, on a classic and on a quorum queue.

Prints delivered msg/s and delivered messages per CPU-second of the load-generating process
(the agent process, or this process for the plain loop), measured in the same run on the same
one-member local RabbitMQ without a CPU quota.

    .venv/bin/python bench/driver_efficiency.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plain_pika import measure_plain_pika  # noqa: E402
from drivers import protocol  # noqa: E402
from orchestrator.agents.local import spawn_local_agents  # noqa: E402
from orchestrator.specs.topology import QueueSpec, TopologySpec  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

QUEUES = {"classic": "eff-classic", "quorum": "eff-quorum"}


def measure_agent(endpoint: str, queue: str, seconds: float, warmup: float,
                  settings: dict[str, Any], message: protocol.MessageShape | None = None,
                  rate: float = 0.0, **destination: Any) -> dict:
    """One agent with one sender (unlimited, or at ``rate`` msg/s) and one receiver,
    connecting with the driver's ``settings`` (the provisioner's credentials); figures over
    ``seconds``. ``message``: the messages' shape (default 2 KiB each); ``destination``:
    further :class:`~drivers.protocol.Destination` fields (an exchange and routing keys)."""
    with tempfile.TemporaryDirectory() as logs:
        (agent,) = spawn_local_agents(1, Path(logs), max_lifetime_s=seconds + warmup + 120)
        try:
            agent.configure(protocol.Configure(
                broker="rabbitmq", pattern="point-to-point",
                message=message or protocol.MessageShape(sizes=(2048,)),
                destination=protocol.Destination((endpoint,), queue, prefetch=1000,
                                                 **destination),
                senders=[protocol.SenderConfig(1, rate, endpoint)],
                receivers=[protocol.ReceiverConfig(1, endpoint)], settings=settings))
            process = psutil.Process(agent.process.pid)
            time.sleep(warmup)
            before, cpu0, t0 = agent.snapshot(), _cpu(process), time.monotonic()
            time.sleep(seconds)
            after, cpu1, t1 = agent.snapshot(), _cpu(process), time.monotonic()
        finally:
            agent.stop()
    received = after.received - before.received
    published = after.sent - before.sent
    return {"published": published, "received": received, "seconds": t1 - t0,
            "cpu_seconds": cpu1 - cpu0, "msgs_per_s": received / (t1 - t0),
            "msgs_per_cpu_s": received / max(cpu1 - cpu0, 1e-9),
            "backlog_growth": published - received}


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()
    topology = TopologySpec(
        name="bench-eff", members=1, start=1, port_base=7400,
        queues=[QueueSpec(name=QUEUES["classic"], type="classic"),
                QueueSpec(name=QUEUES["quorum"], type="quorum")])
    provisioner = LocalRabbitMQ(topology)
    try:
        (member,) = [m for m in provisioner.up() if m.running]
        api = provisioner.management()
        settings = provisioner.client_settings()
        print(f"{'queue':8} {'generator':18} {'delivered msg/s':>16} {'msg per CPU-s':>14} "
              f"{'CPU s':>6} {'backlog +':>10}")
        for kind, queue in QUEUES.items():
            plain = measure_plain_pika(member.host, member.port, queue, seconds=args.seconds,
                                       warmup=args.warmup, queue_type=kind, cleanup=False,
                                       credentials=(settings["user"], settings["password"]))
            api.request("DELETE", f"/queues/%2F/{queue}/contents")
            ours = measure_agent(member.endpoint, queue, args.seconds, args.warmup, settings)
            api.request("DELETE", f"/queues/%2F/{queue}/contents")
            for name, figures in (("plain pika loop", plain), ("surge agent", ours)):
                print(f"{kind:8} {name:18} {figures['msgs_per_s']:>16,.0f} "
                      f"{figures['msgs_per_cpu_s']:>14,.0f} {figures['cpu_seconds']:>6.1f} "
                      f"{figures.get('backlog_growth', figures.get('backlog', 0)):>10,}",
                      flush=True)
            print(f"{kind:8} {'surge / plain':18} {ours['msgs_per_s'] / plain['msgs_per_s']:>16.2f}"
                  f" {ours['msgs_per_cpu_s'] / plain['msgs_per_cpu_s']:>14.2f}", flush=True)
    finally:
        provisioner.down()


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("driver_efficiency"):
        main()
