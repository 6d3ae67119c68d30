"""Provisioner and agent behaviour against real RabbitMQ nodes."""

import time
import urllib.request

import pytest

from drivers import protocol
from orchestrator.agents.local import spawn_local_agents
from orchestrator.errors import AgentError

pytestmark = pytest.mark.integration


def test_up_is_idempotent_and_forms_one_cluster(cluster, topology):
    before = {m.name: m.pid for m in cluster.status() if m.running}
    assert len(before) == topology.start
    after = {m.name: m.pid for m in cluster.up() if m.running}
    assert after == before
    assert sorted(cluster.management().running_nodes()) == sorted(before)
    assert set(cluster.settled_queue_depths()) >= {"perf", "plain"}
    serving = [m for m in cluster.status() if m.running]
    stats = [cluster.member_stats(m) for m in serving]  # each member answers for itself
    assert all(s is not None and s.connections >= 0 for s in stats), stats


def _until(condition, timeout_s: float, what: str) -> None:
    """Wait for ``condition``: the management API learns of a node's change from the cluster's
    own node monitor, a moment after the node itself (longer on a busy host)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} after {timeout_s:.0f} s"
        time.sleep(0.2)


def test_a_pool_member_stands_by_serves_and_returns_to_standby(cluster):
    standing_by = cluster.status()[3]
    assert standing_by.standby  # the warm pool: booted, joined, application stopped
    member = cluster.start_member()
    cluster.seen_pids.add(member.pid)
    assert member.index == 3 and member.running and not member.standby
    assert member.pid == standing_by.pid  # the application started in the VM that stood by
    assert member.name in cluster.management().running_nodes()
    sample = {m.name: m for m in cluster.sample().members}
    assert sample[member.name].cpu is not None
    cluster.stop_member(member.index)
    assert cluster.status()[member.index].standby
    _until(lambda: member.name not in cluster.management().running_nodes(), 15,
           "the management API still lists the stopped member as running")
    cluster.stop_member(member.index, kill=True)  # gone entirely: the next start boots it
    assert not cluster.status()[member.index].standby
    rebooted = cluster.start_member(member.index)
    cluster.seen_pids.add(rebooted.pid)
    assert rebooted.running and rebooted.pid != member.pid
    assert rebooted.name in cluster.management().running_nodes()
    cluster.stop_member(member.index)


def test_agent_guards_its_control_api(tmp_path):
    (agent,) = spawn_local_agents(1, tmp_path, max_lifetime_s=60)
    try:
        wrong = type(agent)(agent.index, agent.host, agent.port, "not-the-token")
        with pytest.raises(AgentError, match="401"):
            wrong.snapshot()
        assert agent.snapshot().sent == 0
        with urllib.request.urlopen(agent.url + "/metrics", timeout=5) as response:
            text = response.read().decode()
        assert "surge_agent_sent_total" in text and "surge_agent_latency_seconds_bucket" in text
    finally:
        agent.stop()
    assert agent.process.poll() is not None


@pytest.mark.parametrize("fast_path", ["1", "0"], ids=["fast-path", "pika-public-api"])
def test_workers_reconnect_to_another_member_when_theirs_stops(cluster, tmp_path, monkeypatch,
                                                               fast_path):
    """Also on the fallback path (pika's public API), which a pika the fast paths were not
    checked against gets."""
    monkeypatch.setenv("SURGE_AMQP_FAST_PATH", fast_path)  # the agent inherits it
    member = cluster.start_member()
    cluster.seen_pids.add(member.pid)
    endpoints = [m.endpoint for m in cluster.running()]
    (agent,) = spawn_local_agents(1, tmp_path, max_lifetime_s=120)
    try:
        agent.configure(protocol.Configure(
            broker="rabbitmq", pattern="point-to-point",
            message=protocol.MessageShape(sizes=(512,)),
            destination=protocol.Destination(tuple(endpoints), "plain", confirms=True),
            senders=[protocol.SenderConfig(1, 200, member.endpoint)],
            receivers=[protocol.ReceiverConfig(1, member.endpoint)],
            settings=cluster.client_settings()))
        time.sleep(3)
        before = agent.snapshot()
        assert before.received > 300 and before.connections == 2
        cluster.stop_member(member.index)
        time.sleep(6)
        after = agent.snapshot()
        assert after.reconnects >= 2 and after.errors >= 2
        assert after.connections == 2  # both back, on other members
        time.sleep(2)
        later = agent.snapshot()
        assert later.sent - after.sent > 300  # sending goes on at about 200 msg/s
        assert later.received - after.received > 300
        assert later.fast_path.on == (fast_path == "1"), later.fast_path  # the snapshot says
    finally:
        agent.stop()
    said = (tmp_path / "agent-0.log").read_text()
    assert ("AMQP fast paths off" in said) == (fast_path == "0"), said
