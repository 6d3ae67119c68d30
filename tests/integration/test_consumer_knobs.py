"""PerfTest's publisher and consumer knobs on a real local RabbitMQ member, each run accounted
exactly: transactions committed on both sides, polling with basic.get, nacks that drop or
requeue, a consumer rate limit, a message limit per receiver, TCP keepalive options."""

import json
import time

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import close_connections, cluster_of, one_agent, wait_until

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "knb", "members": 1, "start": 1, "port_base": 8840, "queues": [
        {"name": "work"},
        # refuses publishes beyond 20 ready messages: the broker nacks them
        {"name": "capped", "arguments": {"x-max-length": 20, "x-overflow": "reject-publish"}}]})


broker = cluster_of(TOPOLOGY)


def run(tmp_path, broker, workload: dict, **scenario) -> tuple[dict, list[dict]]:
    broker.management().request("DELETE", "/queues/%2F/work/contents")  # a test's leftovers
    spec = ScenarioSpec.model_validate({
        "name": "knb", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "work", "senders": 2, "receivers": 2,
                     "message": {"size": 256}, **workload},
        "plan": [{"rate_per_sender": 150, "hold": "4s"}], "measure": {"drain": "6s"},
        **scenario})
    Controller(spec, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return json.loads((run_dir / "run.json").read_text()), events


def test_transactions_on_both_sides_commit_every_message(broker, tmp_path):
    manifest, _ = run(tmp_path, broker, {"publish_transaction": 7, "consume_transaction": 5,
                                 "tcp_options": {"TCP_KEEPIDLE": 30, "TCP_KEEPINTVL": 5}})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["sent"] > 1000 and books["balanced"], books["explain"]
    assert details["committed"] == books["sent"] == books["received"]


def test_polling_receivers_take_every_message(broker, tmp_path):
    manifest, _ = run(tmp_path, broker, {"polling": True, "polling_interval": "20ms"})
    books = manifest["accounting"]
    assert books["sent"] > 1000 and books["balanced"], books["explain"]
    assert books["received"] == books["sent"]


def test_nacks_that_drop_are_received_and_rejected(broker, tmp_path):
    manifest, _ = run(tmp_path, broker, {"nack": "drop"})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["balanced"], books["explain"]
    assert details["rejected"] == books["received"] == books["sent"]


def test_nacks_that_requeue_leave_every_message_queued(broker, tmp_path):
    manifest, _ = run(tmp_path, broker, {"nack": "requeue"}, measure={"drain": "2s"})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["received"] == 0 and books["still_queued"] == books["sent"] > 1000
    assert books["balanced"], books["explain"]
    assert details["requeued"] > books["sent"]  # each delivered and nacked again and again


def test_a_consumer_rate_limit_holds_each_receiver_to_it(broker, tmp_path):
    manifest, events = run(tmp_path, broker, {"consumer_rate": 40},
                           measure={"drain": "2s", "settle": 1})  # a row of 3 s, not 1
    assert "steps" in manifest, [e for e in events if e["kind"] in ("error", "exit")]
    (step,) = manifest["steps"]
    assert step["achieved_rate"] <= 2 * 40 * 1.15  # two receivers of 40 msg/s, sends 300 msg/s
    assert step["achieved_rate"] > 2 * 40 * 0.7
    books = manifest["accounting"]
    assert books["balanced"] and books["still_queued"] > 500, books["explain"]


def test_receivers_stop_at_their_message_limit_and_the_run_ends(broker, tmp_path):
    manifest, events = run(tmp_path, broker, {}, exit={"messages_per_receiver": 200},
                           plan=[{"rate_per_sender": 100, "hold": "30s"}])
    assert any(e["kind"] == "exit" and e["reason"] == "every receiver took its messages"
               for e in events)
    books = manifest["accounting"]
    assert books["received"] == 400 and books["balanced"], books["explain"]


def test_without_reconnecting_a_lost_connection_stops_its_worker(broker, tmp_path):
    from drivers import protocol
    endpoint = broker.running()[0].endpoint
    destination = protocol.Destination((endpoint,), "work", reconnect=False)
    with one_agent(broker, tmp_path, destination,
                   senders=[protocol.SenderConfig(1, 100, endpoint)],
                   receivers=[protocol.ReceiverConfig(1, endpoint)]) as agent:
        wait_until(lambda: agent.snapshot().received > 50)
        close_connections(broker, at_least=2)
        wait_until(lambda: agent.snapshot().connections == 0, what=agent.snapshot)
        time.sleep(2)  # the backoff would have connected again by now
        last = agent.snapshot()
        assert (last.connections, last.reconnects) == (0, 0) and last.errors >= 2
        assert "not connecting again" in last.last_error


def test_publishes_the_broker_nacks_are_published_again_and_every_one_is_accounted_for(
        broker, tmp_path):
    """A queue that refuses publishes beyond 20 ready messages nacks them; the senders read
    the nacks (on the fast path: off their own connection's frames), publish them again after
    a backoff, and the books say what became of each."""
    manifest, _ = run(tmp_path, broker, {"queue": "capped", "confirms": True,
                                         "consumer_rate": 100, "prefetch": 5},
                      plan=[{"rate_per_sender": 150, "hold": "3s"}], measure={"drain": "8s"})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["balanced"], books["explain"]
    assert books["nacked"] > 50, books  # 300 msg/s into a queue drained at 200
    assert details["nacks_republished"] > 0 and books["confirmed"] > 0
    assert books["duplicates"] == 0 and details["republished"] == details["nacks_republished"]
