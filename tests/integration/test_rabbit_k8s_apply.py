"""RabbitMQ through the RabbitMQ cluster operator, and agents as pods, on a real cluster: up with
one member, scale out to two, two agent pods answering /snapshot, scale-in refused, down.

Runs only where ``KUBECONFIG`` names a kubeconfig whose cluster serves the operator's CRD
(rabbitmqclusters.rabbitmq.com) and has the test namespace; skipped otherwise, with the reason.
The agent pods need an image with surge installed that the cluster can run. With kind::

    kind create cluster --name surge
    kubectl apply -f https://github.com/rabbitmq/cluster-operator/releases/latest/download/cluster-operator.yml
    kubectl -n rabbitmq-system rollout status deployment/rabbitmq-cluster-operator
    kubectl create namespace surge
    docker build -t surge:dev --build-arg EXTRAS= .      # the Containerfile, agents only
    kind load docker-image surge:dev --name surge
    KUBECONFIG=~/.kube/config SURGE_TEST_AGENT_IMAGE=surge:dev \\
        .venv/bin/pytest tests/integration/test_rabbit_k8s_apply.py -v

With k3d the same, with ``k3d cluster create surge`` and ``k3d image import surge:dev -c surge``
instead of the two kind commands. Both come with a default StorageClass; elsewhere set
``SURGE_TEST_K8S_STORAGE_CLASS``. Other variables: ``SURGE_TEST_K8S_NAMESPACE`` (default
``surge``), ``SURGE_TEST_RABBITMQ_IMAGE`` (default: the operator's), ``SURGE_TEST_AGENT_IMAGE``
(default ``surge:dev``). The test runs outside the cluster, so it reaches the members' management
API and the agents through the API server's port-forward.
"""

from __future__ import annotations

import os
import secrets

import pytest

from drivers import protocol
from orchestrator.agents.pods import start_agent_pods, stop_agent_pods
from orchestrator.errors import ProvisionError
from orchestrator.specs.hosts import RabbitKubernetesSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.kube import cluster_with_operator
from topologies.rabbitmq.kubernetes import RabbitKubernetesProvisioner

CRD = "rabbitmqclusters.rabbitmq.com"
NAMESPACE = os.environ.get("SURGE_TEST_K8S_NAMESPACE", "surge")


def _cluster_with_operator() -> str | None:
    return cluster_with_operator(CRD, "RabbitMQ operator")


@pytest.fixture(scope="module")
def topology() -> TopologySpec:
    reason = _cluster_with_operator()
    if reason:
        pytest.skip(reason)
    env = os.environ.get
    return TopologySpec(
        name="surge-it", broker="rabbitmq", placement="kubernetes", members=2, start=1,
        cpu_per_member=0.5,
        queues=[QueueSpec(name="perf", type="quorum", per_member=True)],
        kubernetes=RabbitKubernetesSpec(
            namespace=NAMESPACE, memory="1Gi", storage="1Gi",
            storage_class=env("SURGE_TEST_K8S_STORAGE_CLASS"),
            image=env("SURGE_TEST_RABBITMQ_IMAGE"),
            agent_image=env("SURGE_TEST_AGENT_IMAGE", "surge:dev"), ready_timeout=600))


def test_up_scale_out_agent_pods_down(topology):
    provisioner = RabbitKubernetesProvisioner(topology)
    done: list[str] = []
    try:
        members = provisioner.up()
        assert [m.running for m in members] == [True, False]
        assert members[0].host == f"surge-it-server-0.surge-it-nodes.{NAMESPACE}"
        assert members[0].endpoint and members[0].endpoint.startswith("amqp://")

        added = provisioner.start_member()
        assert (added.index, added.running) == (1, True)
        assert [m.running for m in provisioner.status()] == [True, True]
        sample = provisioner.sample()
        assert [m.running for m in sample.members] == [True, True]
        assert {"perf.0", "perf.1"} <= set(provisioner.settled_queue_depths())

        with pytest.raises(ProvisionError, match="does not support scaling down"):
            provisioner.stop_member(1)

        run_id = "it-" + secrets.token_hex(4)
        handles = start_agent_pods(2, topology, run_id, secrets.token_urlsafe(24), 300)
        try:
            assert sorted(h.index for h in handles) == [0, 1]
            for handle in handles:
                assert handle.hello().protocol == protocol.PROTOCOL_VERSION
                assert handle.snapshot().sent == 0
        finally:
            deleted = stop_agent_pods(handles, topology, run_id)
        assert any(line.startswith("deleted Job") for line in deleted)
    finally:
        done = provisioner.down()
    assert f"deleted RabbitmqCluster {NAMESPACE}/surge-it" in done
    assert [m.running for m in provisioner.status()] == [False, False]
