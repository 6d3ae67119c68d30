"""The drain on a node whose lifetime counters keep deliveries never acknowledged: a client
takes messages without acknowledging them and closes its channel (the broker requeues them;
another client then takes them properly). The node's ``delivered (manual ack) -
acknowledged`` stays above 0 for good, and a depth made of it was frozen at that residue while
marked fresh, so every drain ran its whole ``measure.drain``. The run's depth is the queues'
ready count plus what its own receivers hold, and the drain ends at the first tick that sees
everything received and acknowledged.

The node is started here, outside surge, on ports 11020-11025 (the controller's /metrics on
11026), and the run drives it as an existing cluster."""

from __future__ import annotations

import json
import urllib.request

import pika
import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.integrity import suspect_samples
from results.rundir.tables import read_table
from tests.integration.outside_broker import outside_broker

pytestmark = pytest.mark.integration

PORT_BASE = 11020  # amqp, amqps, management, prometheus, distribution, epmd: 11020..11025
METRICS_PORT = 11026
QUEUE = "perf-residue"
RESIDUE = 50
PASSWORD_VARIABLE = "SURGE_TEST_RESIDUE_PASSWORD"
DRAIN_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with outside_broker(tmp_path_factory.mktemp("residue"), PORT_BASE) as running:
        with pika.BlockingConnection(parameters(running)) as connection:
            connection.channel().queue_declare(QUEUE, durable=True,
                                               arguments={"x-queue-type": "quorum"})
        yield running


def parameters(broker) -> pika.ConnectionParameters:
    credentials = pika.PlainCredentials(broker.user, broker.password)
    return pika.ConnectionParameters("127.0.0.1", broker.amqp_port, credentials=credentials)


def leave_residue(broker, count: int) -> None:
    """Publish ``count`` messages, take them all without acknowledging and close the channel
    (back in the queue, redelivered later), then take them again and acknowledge them: the
    queue is empty, the node's counters keep ``count`` deliveries never acknowledged."""
    with pika.BlockingConnection(parameters(broker)) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        for _ in range(count):
            channel.basic_publish("", QUEUE, b"residue")
    with pika.BlockingConnection(parameters(broker)) as connection:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=count)
        for taken, (method, _, _) in enumerate(
                channel.consume(QUEUE, inactivity_timeout=10), start=1):
            assert method is not None, f"only {taken - 1} of {count} delivered"
            if taken == count:
                break
        channel.close()  # unacknowledged: requeued
    with pika.BlockingConnection(parameters(broker)) as connection:
        channel = connection.channel()
        for _ in range(count + 1):  # bounded: the queue holds count
            method, _, _ = channel.basic_get(QUEUE)
            if method is None:
                break
            channel.basic_ack(method.delivery_tag)
        assert channel.queue_declare(QUEUE, passive=True).method.message_count == 0


def lifetime_unacknowledged(broker) -> int:
    """What the node's counters say is delivered and unacknowledged: deliveries needing an
    ack less acks, summed over protocols and queue types (the depth's old source)."""
    url = f"http://127.0.0.1:{broker.prometheus_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    sums = {"manual": 0.0, "acked": 0.0}
    for line in text.splitlines():
        for name, key in (("rabbitmq_global_messages_delivered_consume_manual_ack_total", "manual"),
                          ("rabbitmq_global_messages_delivered_get_manual_ack_total", "manual"),
                          ("rabbitmq_global_messages_acknowledged_total", "acked")):
            if line.startswith(name + "{") or line.startswith(name + " "):
                sums[key] += float(line.rsplit(" ", 1)[1])
    return int(sums["manual"] - sums["acked"])


def topology(broker) -> TopologySpec:
    return TopologySpec.model_validate({
        "name": "residue", "placement": "existing", "cpu_per_member": 1,
        "existing": {"members": [{
            "uri": f"amqp://127.0.0.1:{broker.amqp_port}",
            "prometheus": f"http://127.0.0.1:{broker.prometheus_port}",
            "management": f"http://127.0.0.1:{broker.management_port}"}],
            "credentials": {"user": broker.user, "password_env": PASSWORD_VARIABLE}},
        "queues": [{"name": QUEUE, "type": "quorum"}]})


SCENARIO = {
    "name": "drain-residue", "topology": "unused.yaml", "agents": 1,
    "workload": {"queue": QUEUE, "senders": 2, "receivers": 2, "confirms": True,
                 "message": {"size": "1KiB"}},
    "plan": [{"rate_per_sender": 100, "hold": "6s"}],
    "measure": {"settle": "2s", "drain": f"{DRAIN_S}s"}}


def test_a_residue_in_the_nodes_counters_neither_freezes_the_depth_nor_holds_the_drain(
        broker, tmp_path, monkeypatch):
    leave_residue(broker, RESIDUE)
    assert lifetime_unacknowledged(broker) >= RESIDUE  # what the depth used to add, for good
    monkeypatch.setenv(PASSWORD_VARIABLE, broker.password)
    result = Controller(ScenarioSpec.model_validate(SCENARIO), topology(broker), tmp_path,
                        live=False, metrics_port=METRICS_PORT).run()
    assert result.outcome == "completed"
    assert result.accounting.lost == 0 and result.accounting.still_queued == 0
    assert lifetime_unacknowledged(broker) >= RESIDUE  # still there after the run

    manifest = json.loads((result.run_dir / "run.json").read_text())
    end = manifest["phases"][-1]["end_s"]
    ticks = sorted(read_table(result.run_dir, "ticks").to_pylist(), key=lambda t: t["elapsed_s"])
    drain = [t for t in ticks if t["phase"] == 0 and t["elapsed_s"] > end]
    events = [json.loads(line) for line in
              (result.run_dir / "events.jsonl").read_text().splitlines()]
    stopped = next(e["t"] for e in events if e["kind"] == "senders_stop")
    drained = next(e for e in events if e["kind"] == "drained")

    # (a) the drain ends at the first tick (or, with an ack still batched, the one after)
    # that sees every message received; frozen, it took DRAIN_S
    accounted = next(i for i, t in enumerate(drain) if t["received"] >= t["sent"])
    assert len(drain) - 1 - accounted <= 1, [(t["elapsed_s"], t["queue_depth"]) for t in drain]
    assert len(drain) <= 4 and drained["t"] - stopped < DRAIN_S / 3, drain

    # (b) the depth in the drain is what the queue and the receivers hold, never the residue
    assert drained["queue_depth"] == 0
    last = drain[-1]
    assert last["queue_depth"] == 0 and last["depth_age_s"] is not None \
        and last["depth_age_s"] <= 1.0 and last["unacked"] == 0 and last["held"] == 0
    for tick in drain:
        if tick["depth_age_s"] is None:  # unknown this second (a late reading): not fresh
            assert tick["queue_depth"] is None
        elif tick["received"] >= tick["sent"]:  # all in: only batched acks may remain
            assert tick["queue_depth"] == tick["unacked"] + tick["held"] < RESIDUE, tick
    assert all(t["unacked"] >= 0 for t in ticks)
    members = read_table(result.run_dir, "members").to_pylist()
    assert suspect_samples(ticks, members).frozen_depth_runs == 0
