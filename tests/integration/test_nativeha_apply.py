"""Document 003's Native HA topology applied to a real cluster with the IBM MQ operator: up with
one queue manager, scale out to two, down.

Runs only where ``KUBECONFIG`` names a kubeconfig whose cluster serves the operator's CRD
(queuemanagers.mq.ibm.com); skipped otherwise, with the reason. The document's sizes (32 cores,
16 GiB, storage class ``san``, TLS secret ``mqcert``) rarely fit a test cluster, so these
environment variables adjust them:

- ``SURGE_TEST_MQ_NAMESPACE`` (default ``mq``), which must exist
- ``SURGE_TEST_MQ_STORAGE_CLASS`` (default: the cluster's default storage class)
- ``SURGE_TEST_MQ_CPU`` (default 1) and ``SURGE_TEST_MQ_MEMORY`` (default 1Gi) per queue manager
- ``SURGE_TEST_MQ_TLS_SECRET`` (default: no TLS), ``SURGE_TEST_MQ_LICENSE``,
  ``SURGE_TEST_MQ_VERSION``, ``SURGE_TEST_MQ_USE`` (default NonProduction)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.specs.loader import load_topology
from tests.kube import cluster_with_operator
from topologies.mq.nativeha import NativeHaProvisioner

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "mq-native-ha.yaml"
CRD = "queuemanagers.mq.ibm.com"


def _cluster_with_operator() -> str | None:
    return cluster_with_operator(CRD, "IBM MQ operator")


def _default_storage_class() -> str | None:
    from kubernetes import client
    for storage_class in client.StorageV1Api().list_storage_class().items:
        annotations = storage_class.metadata.annotations or {}
        if annotations.get("storageclass.kubernetes.io/is-default-class") == "true":
            return storage_class.metadata.name
    return None


@pytest.fixture(scope="module")
def provisioner():
    reason = _cluster_with_operator()
    if reason:
        pytest.skip(reason)
    env = os.environ.get
    overrides = [
        "start=1", "members=2",
        f"cpu_per_member={env('SURGE_TEST_MQ_CPU', '1')}",
        f"ibmmq.native_ha.namespace={env('SURGE_TEST_MQ_NAMESPACE', 'mq')}",
        f"ibmmq.native_ha.memory={env('SURGE_TEST_MQ_MEMORY', '1Gi')}",
        f"ibmmq.native_ha.use={env('SURGE_TEST_MQ_USE', 'NonProduction')}",
        f"ibmmq.native_ha.tls_secret={env('SURGE_TEST_MQ_TLS_SECRET', 'null')}",
    ]
    storage_class = env("SURGE_TEST_MQ_STORAGE_CLASS") or _default_storage_class()
    if not storage_class:
        pytest.skip("no SURGE_TEST_MQ_STORAGE_CLASS and the cluster has no default storage class")
    overrides.append(f"ibmmq.native_ha.storage_class={storage_class}")
    for variable, field in (("SURGE_TEST_MQ_LICENSE", "license"),
                            ("SURGE_TEST_MQ_VERSION", "version")):
        if env(variable):
            overrides.append(f"ibmmq.native_ha.{field}={env(variable)}")
    prov = NativeHaProvisioner(load_topology(TOPOLOGY, overrides))
    try:
        yield prov
    finally:
        prov.down()


def test_up_scale_out_down(provisioner):
    members = provisioner.up()
    assert [m.running for m in members] == [True, False]
    assert members[0].host == f"perf0-ibm-mq.{provisioner.namespace}.svc"

    added = provisioner.start_member()
    assert (added.index, added.name, added.running) == (1, "PERF1", True)
    assert [m.running for m in provisioner.status()] == [True, True]
    assert [m.running for m in provisioner.sample().members] == [True, True]

    done = provisioner.down()
    assert f"deleted QueueManager {provisioner.namespace}/perf0" in done
    assert f"deleted QueueManager {provisioner.namespace}/perf1" in done
    assert [m.running for m in provisioner.status()] == [False, False]
