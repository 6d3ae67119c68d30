"""A real 3-member RabbitMQ cluster on loopback, shared by the integration tests."""

import contextlib
import os
import shutil
import time
from urllib.parse import quote

import psutil
import pytest

from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.xdist_worker import worker_index

if not os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server"):
    pytest.skip("Debian's rabbitmq-server is not installed", allow_module_level=True)


@pytest.fixture(scope="session")
def state_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("surge-state")
    os.environ["SURGE_STATE_DIR"] = str(root)
    return root


# each xdist worker's shared cluster (tests/unit/test_suite_ports.py keeps them apart from every
# other port the suite's brokers claim: a base's management and Prometheus ports are +10000 and
# +10100, so two bases 100 apart collide)
SHARED_PORT_BASES = (7200, 7230, 7260, 7290)


@pytest.fixture(scope="session")
def topology() -> TopologySpec:
    """The shared cluster: each worker has its own (names and ports apart)."""
    index = worker_index()
    if index >= len(SHARED_PORT_BASES):
        raise pytest.UsageError(f"at most {len(SHARED_PORT_BASES)} workers (make test JOBS=N)")
    return TopologySpec(
        name=f"it3{'abcdefgh'[index]}" if index else "it3", members=4, start=3,
        cpu_per_member=1.0, port_base=SHARED_PORT_BASES[index],
        queues=[QueueSpec(name="perf", type="quorum",
                          arguments={"x-quorum-initial-group-size": 3}),
                QueueSpec(name="plain", type="classic"),
                QueueSpec(name="pairs-%d", count=4)])


@contextlib.contextmanager
def local_cluster(topology: TopologySpec, state_root):
    """A local cluster of ``topology`` started for the duration, stopped by PID afterwards; fails
    if any of its broker processes is left behind."""
    from topologies.rabbitmq.linked import LinkedLocalRabbitMQ
    from topologies.rabbitmq.local import LocalRabbitMQ
    provisioner = (LinkedLocalRabbitMQ if topology.link else LocalRabbitMQ)(topology, state_root)
    seen_pids: set[int] = set()
    try:
        members = provisioner.up()
        seen_pids.update(m.pid for m in members if m.pid)
        provisioner.seen_pids = seen_pids
        yield provisioner
    finally:
        seen_pids.update(m.pid for m in provisioner.status() if m.pid)
        provisioner.down()
        left = [pid for pid in seen_pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        assert not left, f"broker processes left behind: {left}"


@contextlib.contextmanager
def one_agent(broker, tmp_path, destination, senders=(), receivers=(), size: int = 128):
    """An agent of the test's own, configured on ``broker`` with ``destination`` and these
    ``senders`` and ``receivers`` of ``size``-byte messages; stopped on leaving."""
    from drivers import protocol
    from orchestrator.agents.local import spawn_local_agents
    (agent,) = spawn_local_agents(1, tmp_path, max_lifetime_s=90)
    try:
        agent.configure(protocol.Configure(
            broker="rabbitmq", pattern="point-to-point",
            message=protocol.MessageShape(sizes=(size,)), destination=destination,
            senders=list(senders), receivers=list(receivers),
            settings=broker.client_settings()))
        yield agent
    finally:
        agent.stop()


def wait_until(condition, seconds: float = 30.0, what=lambda: None) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds``, saying ``what()``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out: {what()}"
        time.sleep(0.1)


def close_connections(broker, at_least: int) -> None:
    """Have ``broker`` (a local provisioner) close every client connection, once its
    management API lists at least ``at_least`` of them (it lists them once sampled)."""
    api = broker.management()
    wait_until(lambda: len(api.request("GET", "/connections")) >= at_least)
    for connection in api.request("GET", "/connections"):
        api.request("DELETE", "/connections/" + quote(connection["name"], safe=""))


def cluster_of(topology: TopologySpec):
    """A module-scoped fixture: a local cluster of ``topology`` for the tests of one module
    (``broker = cluster_of(TOPOLOGY)``)."""
    @pytest.fixture(scope="module")
    def broker(state_root):
        with local_cluster(topology, state_root) as provisioner:
            yield provisioner
    return broker


@pytest.fixture(scope="session")
def cluster(state_root, topology):
    try:
        with local_cluster(topology, state_root) as provisioner:
            yield provisioner
    finally:
        shutil.rmtree(state_root, ignore_errors=True)
