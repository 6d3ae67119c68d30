"""RabbitMQ on Kubernetes and agents as pods, without a cluster: the rendered RabbitmqCluster
against a schema written from the operator's API types, the agents' Job/Secret/Service against
schemas written from the Kubernetes API reference, the provisioner and the agent pods against
recording fake APIs (no ``kubernetes`` package needed), and the port-forward relay against a
local HTTP server standing in for an agent."""

from __future__ import annotations

import base64
import copy
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from drivers import protocol
from orchestrator.agents import pods as agent_pods
from orchestrator.agents.client import AgentHandle
from orchestrator.errors import AgentError, ProvisionError
from orchestrator.specs.hosts import RabbitKubernetesSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.kube import FakeApiError, FakeClock
from topologies.factory import provisioner_for
from topologies.rabbitmq import kubernetes as rk
from topologies.rabbitmq import manifests as rm

SCHEMAS = Path(__file__).resolve().parents[2] / "tests" / "schemas"
TOKEN = "tok-" + "x" * 28
RUN = "20260101T120000Z-quickstart"


def topology(**overrides) -> TopologySpec:
    kube = {"namespace": "perf", **overrides.pop("kubernetes", {})}
    fields = {"name": "rmq-k8s", "broker": "rabbitmq", "placement": "kubernetes", "members": 5,
              "start": 3, "cpu_per_member": 0.5,
              "queues": [QueueSpec(name="perf", type="quorum", per_member=True),
                         QueueSpec(name="pt-%d", count=4, type="quorum")],
              "kubernetes": RabbitKubernetesSpec(**kube), **overrides}
    return TopologySpec(**fields)


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# -- the RabbitmqCluster ------------------------------------------------------------------------

def test_rabbitmqcluster_carries_the_topology():
    spec = topology(kubernetes={"image": "rabbitmq:4.1-management", "memory": "4Gi",
                                "storage": "20Gi", "storage_class": "fast-ssd",
                                "additional_config": {"channel_max": "1050"}})
    cluster = rm.render(spec)
    validator("rabbitmqcluster-v1beta1.json").validate(cluster)
    assert cluster["apiVersion"] == "rabbitmq.com/v1beta1" and cluster["kind"] == "RabbitmqCluster"
    assert cluster["metadata"] == {"name": "rmq-k8s", "namespace": "perf", "labels": {
        "app.kubernetes.io/managed-by": "surge", "app.kubernetes.io/part-of": "rmq-k8s"}}
    body = cluster["spec"]
    assert body["replicas"] == 3 and body["image"] == "rabbitmq:4.1-management"
    assert body["resources"] == {"requests": {"cpu": "500m", "memory": "4Gi"},
                                 "limits": {"cpu": "500m", "memory": "4Gi"}}
    assert body["persistence"] == {"storage": "20Gi", "storageClassName": "fast-ssd"}
    assert "additionalPlugins" not in body["rabbitmq"]  # management+prometheus are the operator's
    # 4Gi: RabbitMQ gets 3.2 GiB; a quarter of it exceeds the 512 MiB default, which stays
    assert body["rabbitmq"]["additionalConfig"] == (
        "collect_statistics_interval = 1000\nraft.wal_max_size_bytes = 536870912\n"
        "channel_max = 1050\n")


def test_defaults_leave_out_what_the_topology_does_not_set():
    body = rm.render(topology(cpu_per_member=None))["spec"]
    validator("rabbitmqcluster-v1beta1.json").validate({"apiVersion": "rabbitmq.com/v1beta1",
                                                        "kind": "RabbitmqCluster",
                                                        "metadata": {"name": "x"}, "spec": body})
    assert "image" not in body and "storageClassName" not in body["persistence"]
    assert body["resources"] == {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    assert body["persistence"] == {"storage": "10Gi"}


@pytest.mark.parametrize(("memory", "wal"), [
    ("2Gi", 429496729),  # 2 GiB less 20% = 1.6 GiB; a quarter of it
    ("1Gi", 214748364),
    ("16Gi", 512 * 2 ** 20),  # 14 GiB for RabbitMQ (2 GiB headroom at most): the default
])
def test_wal_limit_is_a_quarter_of_rabbitmqs_memory_at_most_the_default(memory, wal):
    config = rm.render(topology(kubernetes={"memory": memory}))["spec"]["rabbitmq"][
        "additionalConfig"]
    assert f"raft.wal_max_size_bytes = {wal}\n" in config


def test_additional_config_overrides_surges_defaults_key_by_key():
    spec = topology(kubernetes={"additional_config": {"collect_statistics_interval": "5000",
                                                      "raft.wal_max_size_bytes": "64000000"}})
    assert rm.render(spec)["spec"]["rabbitmq"]["additionalConfig"] == (
        "collect_statistics_interval = 5000\nraft.wal_max_size_bytes = 64000000\n")


def test_replicas_and_plugins_can_be_asked_for():
    cluster = rm.render(topology(), replicas=4, plugins=["rabbitmq_top", "rabbitmq_shovel"])
    validator("rabbitmqcluster-v1beta1.json").validate(cluster)
    assert cluster["spec"]["replicas"] == 4
    assert cluster["spec"]["rabbitmq"]["additionalPlugins"] == ["rabbitmq_top",
                                                                "rabbitmq_shovel"]


def test_schema_refuses_what_the_operator_would_not_take():
    cluster = rm.render(topology())
    broken = copy.deepcopy(cluster)
    broken["spec"]["replica"] = 3  # misspelt
    broken["spec"]["rabbitmq"]["additionalConfig"] = "x = 1\n" * 400
    broken["spec"]["rabbitmq"]["additionalPlugins"] = ["rabbitmq-top"]
    broken["spec"]["replicas"] = -1
    messages = [e.message for e in validator("rabbitmqcluster-v1beta1.json").iter_errors(broken)]
    assert any("'replica' was unexpected" in m for m in messages)
    assert any("is too long" in m for m in messages)
    assert any("does not match" in m and "rabbitmq-top" in m for m in messages)
    assert any("less than the minimum of 0" in m for m in messages)


@pytest.mark.parametrize(("override", "complaint"), [
    ({"kubernetes": {"namespace": "Perf_NS"}}, "namespace 'Perf_NS' is not a namespace"),
    ({"kubernetes": {"memory": "lots"}}, "memory 'lots' is not a quantity"),
    ({"kubernetes": {"image": "bad image"}}, "image 'bad image' is not an image"),
    ({"kubernetes": {"additional_config": {"a": "1\nb = 2"}}}, "one-line values"),
    ({"kubernetes": {"additional_config": {f"k{i}": "v" * 40 for i in range(60)}}},
     "the operator takes 2000"),
    ({"name": "a" * 46}, "is over 45 characters"),
])
def test_values_that_would_break_the_manifest_are_refused(override, complaint):
    with pytest.raises(ProvisionError, match=complaint):
        rm.render(topology(**override))


def test_a_topology_that_is_not_rabbitmq_on_kubernetes_is_refused():
    with pytest.raises(ProvisionError, match="not RabbitMQ on Kubernetes.*placement local"):
        rm.render(TopologySpec(name="r", members=1, start=1))
    assert rm.cluster_name(topology(name="3-nodes")) == "rmq-3-nodes"


# -- a fake operator ------------------------------------------------------------------------------

def fake_pod(name: str, ready: bool, waiting: str | None = None, index: int | None = None,
             ip: str = "10.0.0.1") -> SimpleNamespace:
    """A pod shaped like the client's V1Pod (attributes, snake_case)."""
    state = SimpleNamespace(waiting=SimpleNamespace(reason=waiting, message="no such image")
                            if waiting else None)
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, annotations=None if index is None else {
            agent_pods.INDEX_ANNOTATION: str(index)}),
        status=SimpleNamespace(phase="Running" if ready else "Pending", reason=None, pod_ip=ip,
                               conditions=[SimpleNamespace(type="Ready",
                                                           status="True" if ready else "False")],
                               container_statuses=[SimpleNamespace(state=state)]))


class FakeOperator:
    """CustomObjectsApi and CoreV1Api of one namespace with a RabbitMQ cluster operator that
    needs ``lag`` reads to reconcile each change (until then its status is stale, as a real one
    can be), at most ``stuck_at`` pods ever Ready, and ``waiting`` on its last pod if given."""

    def __init__(self, lag: int = 3, stuck_at: int | None = None, waiting: str | None = None):
        self.lag, self.stuck_at, self.waiting = lag, stuck_at, waiting
        self.objects: dict[str, dict] = {}
        self.pods = self.ready = self.reads = 0
        self.claims: set[str] = set()
        self.calls: list[tuple] = []

    def _changed(self, name: str) -> None:
        self.objects[name]["metadata"]["generation"] += 1
        self.reads = 0

    def _reconcile(self, name: str) -> None:
        cluster, self.reads = self.objects[name], self.reads + 1
        want = cluster["spec"]["replicas"]
        if self.reads < self.lag:
            return
        self.pods = want
        self.ready = want if self.stuck_at is None else min(want, self.stuck_at)
        self.claims |= {f"persistence-{name}-server-{i}" for i in range(want)}
        ok = self.ready == want
        cluster["status"] = {"observedGeneration": cluster["metadata"]["generation"],
                             "conditions": [
            {"type": "AllReplicasReady", "status": str(ok),
             "reason": "AllPodsAreReady" if ok else "NotAllPodsReady",
             **({} if ok else {"message": f"{self.ready}/{want} Pods ready"})},
            {"type": "ReconcileSuccess", "status": "True", "reason": "Success"}]}

    def _check(self, group, version, namespace, plural):
        assert (group, version, namespace, plural) == ("rabbitmq.com", "v1beta1", "perf",
                                                       "rabbitmqclusters")

    # CustomObjectsApi
    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self._check(group, version, namespace, plural)
        name = body["metadata"]["name"]
        self.calls.append(("create", name, body["spec"]["replicas"]))
        if name in self.objects:
            raise FakeApiError(409, "Conflict")
        self.objects[name] = copy.deepcopy(body)
        self.objects[name]["metadata"].update(generation=0, resourceVersion="41")
        self._changed(name)
        return body

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        self._check(group, version, namespace, plural)
        if name not in self.objects:
            raise FakeApiError(404, "Not Found")
        self._reconcile(name)
        return copy.deepcopy(self.objects[name])

    def replace_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.calls.append(("replace", name, body["spec"]["replicas"],
                           body["metadata"].get("resourceVersion")))
        body = copy.deepcopy(body)
        body["metadata"]["generation"] = self.objects[name]["metadata"]["generation"]
        body["status"] = self.objects[name].get("status", {})
        self.objects[name] = body
        self._changed(name)

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.calls.append(("patch", name, body))
        self.objects[name]["spec"].update(body["spec"])
        self._changed(name)

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name):
        self.calls.append(("delete", name))
        if self.objects.pop(name, None) is None:
            raise FakeApiError(404, "Not Found")
        self.pods = self.ready = 0

    # CoreV1Api
    def list_namespaced_pod(self, namespace, label_selector):
        assert label_selector == "app.kubernetes.io/name=rmq-k8s"
        return SimpleNamespace(items=[
            fake_pod(f"rmq-k8s-server-{i}", i < self.ready,
                     self.waiting if i == self.pods - 1 else None) for i in range(self.pods)])

    def read_namespaced_secret(self, name, namespace):
        if name != "rmq-k8s-default-user" or "rmq-k8s" not in self.objects:
            raise FakeApiError(404, "Not Found")
        return SimpleNamespace(data={"username": base64.b64encode(b"admin-x").decode(),
                                     "password": base64.b64encode(b"p@ss/w:rd").decode()})

    def delete_namespaced_pod(self, name, namespace, **kwargs):
        self.calls.append(("delete pod", name, kwargs))

    def delete_namespaced_persistent_volume_claim(self, name, namespace):
        if name not in self.claims:
            raise FakeApiError(404, "Not Found")
        self.claims.remove(name)
        self.calls.append(("delete claim", name))


class FakeManagement:
    """The management API of one member, recording what is declared through it."""

    declared: list[tuple[str, str]] = []

    def __init__(self, host, port, username, password):
        assert (username, password) == ("admin-x", "p@ss/w:rd")
        self.host, self.port = host, port

    def declare_queue(self, queue, name=None):
        FakeManagement.declared.append((self.host.split(".")[0], name or queue.name))

    def connections_per_node(self):
        return {"rabbit@rmq-k8s-server-0.rmq-k8s-nodes.perf": 7}

    def queues(self):
        return {"perf.0": 12}, {"rabbit@rmq-k8s-server-0.rmq-k8s-nodes.perf": (100, 90)}


def provisioner(operator: FakeOperator | None = None, **overrides):
    clock = FakeClock()
    FakeManagement.declared = []
    operator = operator or FakeOperator()
    exec_command = overrides.pop("exec_command", None)
    return rk.RabbitKubernetesProvisioner(
        topology(**overrides), custom=operator, core=operator, reach="direct",
        management=FakeManagement, exec_command=exec_command, clock=clock, sleep=clock.sleep)


# -- the provisioner -----------------------------------------------------------------------------

def test_member_is_the_statefulset_pod_behind_the_headless_service():
    member = provisioner().member(1)
    assert member.host == "rmq-k8s-server-1.rmq-k8s-nodes.perf"
    assert member.name == "rabbit@rmq-k8s-server-1.rmq-k8s-nodes.perf"
    assert (member.port, member.management_port, member.prometheus_port) == (5672, 15672,
                                                                                 15692)
    assert member.metrics_url == "http://rmq-k8s-server-1.rmq-k8s-nodes.perf:15692/metrics"
    assert member.endpoint == "amqp://rmq-k8s-server-1.rmq-k8s-nodes.perf:5672"  # no secret


def test_up_applies_start_replicas_waits_for_all_replicas_ready_and_declares_queues():
    operator = FakeOperator(lag=3)
    prov = provisioner(operator)
    members = prov.up()
    assert operator.calls[0] == ("create", "rmq-k8s", 3)
    assert [m.running for m in members] == [True, True, True, False, False]
    assert prov._clock() >= 2 * rk.POLL_INTERVAL_S  # it waited for the operator
    assert members[0].endpoint == "amqp://rmq-k8s-server-0.rmq-k8s-nodes.perf:5672"
    assert prov.client_settings() == {"user": "admin-x", "password": "p@ss/w:rd"}
    # per-member instances through their own member, a pattern's queues in turn
    assert FakeManagement.declared == [
        ("rmq-k8s-server-0", "perf.0"), ("rmq-k8s-server-1", "perf.1"),
        ("rmq-k8s-server-2", "perf.2"), ("rmq-k8s-server-0", "pt-1"),
        ("rmq-k8s-server-1", "pt-2"), ("rmq-k8s-server-2", "pt-3"), ("rmq-k8s-server-0", "pt-4")]


def test_up_again_keeps_a_larger_cluster_and_replaces_with_its_resource_version():
    operator = FakeOperator(lag=1)
    prov = provisioner(operator)
    prov.up()
    prov.start_member()
    prov.up()
    assert operator.calls[-1] == ("replace", "rmq-k8s", 4, "41")


def test_scale_out_patches_replicas_3_to_4_and_waits_for_the_new_pod():
    operator = FakeOperator(lag=3)
    prov = provisioner(operator)
    prov.up()
    FakeManagement.declared.clear()
    added = prov.start_member()
    assert ("patch", "rmq-k8s", {"spec": {"replicas": 4}}) in operator.calls
    assert (added.index, added.running) == (3, True)
    assert added.name == "rabbit@rmq-k8s-server-3.rmq-k8s-nodes.perf"
    assert ("rmq-k8s-server-3", "perf.3") in FakeManagement.declared
    assert [m.running for m in prov.status()] == [True, True, True, True, False]


def test_scale_out_beyond_the_pool_or_out_of_order_is_refused():
    prov = provisioner(FakeOperator(lag=1), members=3)
    with pytest.raises(ProvisionError, match="does not exist; run up first"):
        prov.start_member()
    prov.up()
    with pytest.raises(ProvisionError, match="all 3 members of rmq-k8s run already"):
        prov.start_member()
    prov = provisioner(FakeOperator(lag=1))
    prov.up()
    with pytest.raises(ProvisionError, match="member 4 cannot start before member 3"):
        prov.start_member(4)
    assert prov.start_member(1).running  # one that runs: nothing to do


def test_scale_in_is_refused_with_the_operators_reason_and_kill_deletes_the_pod():
    operator = FakeOperator(lag=1)
    prov = provisioner(operator)
    prov.up()
    writes = len(operator.calls)
    with pytest.raises(ProvisionError, match="cannot stop member 2 of RabbitmqCluster "
                                             "perf/rmq-k8s: the RabbitMQ cluster operator does "
                                             "not support scaling down"):
        prov.stop_member(2)
    assert len(operator.calls) == writes
    prov.stop_member(2, kill=True)
    assert operator.calls[-1] == ("delete pod", "rmq-k8s-server-2", {"grace_period_seconds": 0})


def test_a_cluster_that_never_gets_ready_times_out_naming_it_and_its_conditions():
    prov = provisioner(FakeOperator(lag=1, stuck_at=2), kubernetes={"ready_timeout": 30})
    with pytest.raises(ProvisionError) as caught:
        prov.up()
    message = str(caught.value)
    assert "RabbitmqCluster perf/rmq-k8s not ready with 3 replicas after 30s" in message
    assert "AllReplicasReady False (NotAllPodsReady: 2/3 Pods ready)" in message
    assert "Ready pods [0, 1]" in message and "kubectl describe rabbitmqcluster" in message
    assert caught.value.temporary


def test_a_pod_that_cannot_pull_its_image_fails_at_once():
    prov = provisioner(FakeOperator(lag=1, stuck_at=2, waiting="ImagePullBackOff"))
    with pytest.raises(ProvisionError, match="RabbitmqCluster perf/rmq-k8s cannot become ready: "
                                             "pod rmq-k8s-server-2: ImagePullBackOff"):
        prov.up()
    assert prov._clock() < 5 * rk.POLL_INTERVAL_S


def test_sample_reads_the_management_api_of_a_running_member():
    prov = provisioner(FakeOperator(lag=1))
    prov.up()
    sample = prov.sample()
    first = sample.members[0]
    assert (first.running, first.connections, first.messages_in, first.messages_out) == (
        True, 7, 100, 90)
    assert first.cpu is None and first.cpu_quota_cores == 0.5
    # running, but left out of the API's answer: unknown, not zero
    assert (sample.members[1].connections, sample.members[1].messages_in) == (None, None)
    assert (sample.members[4].running, sample.members[4].messages_in) == (False, None)


def test_settled_depths_come_from_rabbitmqctl_in_a_member():
    ran = []

    def exec_command(pod, argv):
        ran.append((pod, argv))
        return "perf.0\t12\npt-1\t0\nwarning: something\n"

    prov = provisioner(FakeOperator(lag=1), exec_command=exec_command)
    prov.up()
    assert prov.settled_queue_depths() == {"perf.0": 12, "pt-1": 0}
    assert ran == [("rmq-k8s-server-0", ["rabbitmqctl", "list_queues", "-q",
                                         "--no-table-headers", "name", "messages"])]


def test_down_deletes_the_cluster_and_its_volume_claims():
    operator = FakeOperator(lag=1)
    prov = provisioner(operator)
    prov.up()
    assert prov.down() == ["deleted RabbitmqCluster perf/rmq-k8s"] + [
        f"deleted PersistentVolumeClaim perf/persistence-rmq-k8s-server-{i}" for i in range(3)]
    assert operator.objects == {} and operator.claims == set()
    assert [m.running for m in prov.status()] == [False] * 5
    assert prov.down() == []


def test_api_errors_say_what_failed():
    class NoOperator(FakeOperator):
        def get_namespaced_custom_object(self, *args):
            raise FakeApiError(404, "Not Found")

        def create_namespaced_custom_object(self, *args):
            raise FakeApiError(404, "Not Found")

    with pytest.raises(ProvisionError, match="create_namespaced_custom_object failed: 404 Not "
                                             "Found.*CRD rabbitmqclusters.rabbitmq.com"):
        provisioner(NoOperator()).up()


def test_factory_gives_the_operator_provisioner():
    assert isinstance(provisioner_for(topology()), rk.RabbitKubernetesProvisioner)


# -- agent pods: rendering ---------------------------------------------------------------------

def test_agent_objects_are_valid_and_carry_the_run():
    objects = agent_pods.render_agents(3, topology(kubernetes={"agent_image": "reg/surge:1.2"}),
                                       RUN, TOKEN, 3600)
    validator("job-batch-v1.json").validate(objects["job"])
    validator("secret-v1.json").validate(objects["secret"])
    validator("service-v1.json").validate(objects["service"])
    job, name = objects["job"], "surge-agents-20260101t120000z-quickstart"
    assert job["metadata"]["name"] == name and job["metadata"]["namespace"] == "perf"
    assert job["metadata"]["labels"]["surge/run-id"] == "20260101t120000z-quickstart"
    assert job["metadata"]["annotations"] == {"surge/run-id": RUN}
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["completionMode"]) == (3, 3, "Indexed")
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 3660)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["image"] == "reg/surge:1.2"
    assert container["command"] == ["python", "-m", "orchestrator.cli", "agent", "--host",
                                    "0.0.0.0", "--port", "7070", "--max-lifetime", "3600"]
    assert container["env"] == [{"name": "SURGE_AGENT_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": f"{name}-token", "key": "token"}}}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "control"}
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "512Mi"},
                                      "limits": {"memory": "512Mi"}}
    assert objects["secret"]["stringData"] == {"token": TOKEN}
    service = objects["service"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"].items() <= spec["template"]["metadata"]["labels"].items()


def test_agent_schemas_refuse_what_the_api_server_would_not_take():
    job = agent_pods.render_agents(2, topology(), RUN, TOKEN, 60, cpu_limit=True)["job"]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"  # not allowed for a Job
    job["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"] = "a-very-long-port-name"
    messages = [e.message for e in validator("job-batch-v1.json").iter_errors(job)]
    assert any("'Always' is not one of" in m for m in messages)
    assert any("is too long" in m for m in messages)


def test_job_names_are_dns_labels_for_any_run_id():
    name = agent_pods.job_name("20260101T120000Z-" + "a-very-long-scenario-name" * 3)
    assert len(name) <= 43 and agent_pods._DNS_LABEL.match(name)
    assert name != agent_pods.job_name("20260101T120000Z-" + "a-very-long-scenario-name" * 4)


@pytest.mark.parametrize(("kwargs", "complaint"), [
    ({"count": 0}, "count 0"), ({"token": "short"}, "token"),
    ({"cpu": "one"}, "cpu 'one'"), ({"max_lifetime_s": 0}, "max_lifetime_s"),
])
def test_bad_agent_values_are_refused(kwargs, complaint):
    args = {"count": 2, "topology": topology(), "run_id": RUN, "token": TOKEN,
            "max_lifetime_s": 60, **kwargs}
    with pytest.raises(ProvisionError, match=complaint):
        agent_pods.render_agents(**args)


# -- agent pods: applying against a fake API ------------------------------------------------------

class FakeAgentsApi:
    """CoreV1Api and BatchV1Api for the agents: pods appear Ready after ``lag`` listings."""

    def __init__(self, lag: int = 2, waiting: str | None = None, job_exists: bool = False):
        self.lag, self.waiting, self.listings = lag, waiting, 0
        self.objects: dict[tuple[str, str], dict] = {}
        if job_exists:
            self.objects[("Job", agent_pods.job_name(RUN))] = {}
        self.calls: list[tuple] = []

    def _create(self, kind, body):
        key = (kind, body["metadata"]["name"])
        self.calls.append(("create", *key))
        if key in self.objects:
            raise FakeApiError(409, "AlreadyExists")
        self.objects[key] = body
        return SimpleNamespace(metadata=SimpleNamespace(name=key[1], uid=f"uid-{kind}"))

    def _delete(self, kind, name, **kwargs):
        self.calls.append(("delete", kind, name, kwargs))
        if self.objects.pop((kind, name), None) is None:
            raise FakeApiError(404, "Not Found")

    def create_namespaced_secret(self, namespace, body):
        return self._create("Secret", body)

    def create_namespaced_job(self, namespace, body):
        return self._create("Job", body)

    def create_namespaced_service(self, namespace, body):
        return self._create("Service", body)

    def patch_namespaced_secret(self, name, namespace, body):
        self.calls.append(("patch", "Secret", name, body))

    def delete_namespaced_job(self, name, namespace, **kwargs):
        self._delete("Job", name, **kwargs)

    def delete_namespaced_secret(self, name, namespace):
        self._delete("Secret", name)

    def delete_namespaced_service(self, name, namespace):
        self._delete("Service", name)

    def list_namespaced_pod(self, namespace, label_selector):
        name = agent_pods.job_name(RUN)
        assert label_selector == (f"app.kubernetes.io/instance={name},"
                                  f"app.kubernetes.io/name=surge-agent")
        self.listings += 1
        ready = self.listings >= self.lag
        # newest first, as listings come: the handles are sorted by completion index
        return SimpleNamespace(items=[fake_pod(f"{name}-{i}-abcde", ready, self.waiting, i,
                                               f"10.1.0.{i + 10}") for i in (2, 1, 0)])


def start(api: FakeAgentsApi, count: int = 3, **kwargs):
    """Agent pods on the recording API; port-forward streams that cannot be opened unless the
    test gives its own."""
    clock = FakeClock()
    kwargs.setdefault("streams", object())
    return agent_pods.start_agent_pods(count, topology(), RUN, TOKEN, 600, core=api, batch=api,
                                       clock=clock, sleep=clock.sleep, **kwargs)


def test_start_applies_secret_job_service_and_waits_for_ready_pods(monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")  # the controller in the cluster
    api = FakeAgentsApi(lag=3)
    handles = start(api)
    name = agent_pods.job_name(RUN)
    assert [c[:3] for c in api.calls if c[0] == "create"] == [
        ("create", "Secret", f"{name}-token"), ("create", "Job", name),
        ("create", "Service", name)]
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "uid-Job",
              "blockOwnerDeletion": False}]
    assert ("patch", "Secret", f"{name}-token", {"metadata": {"ownerReferences": owner}}) \
        in api.calls
    assert api.objects[("Service", name)]["metadata"]["ownerReferences"] == owner
    assert api.listings == 3
    # never at the pod IPs (plain HTTP with the token): each through its own port-forward
    assert [(h.index, h.host, h.token, h.process) for h in handles] == [
        (0, "127.0.0.1", TOKEN, None), (1, "127.0.0.1", TOKEN, None),
        (2, "127.0.0.1", TOKEN, None)]
    assert len({h.port for h in handles}) == 3 and 7070 not in {h.port for h in handles}
    agent_pods.stop_agent_pods(handles, topology(), RUN, core=api, batch=api)


def test_an_image_that_cannot_be_pulled_fails_and_cleans_up():
    api = FakeAgentsApi(waiting="ImagePullBackOff")
    with pytest.raises(ProvisionError, match=r"agent pod perf/surge-agents-.*-2-abcde of Job "
                                             r".* will not start: ImagePullBackOff"):
        start(api)
    assert api.objects == {}


def test_pods_that_never_get_ready_time_out_and_clean_up():
    api = FakeAgentsApi(lag=10 ** 6)
    with pytest.raises(ProvisionError, match="0 of 3 agent pods of Job perf/surge-agents-.* "
                                             "Ready after 5s") as caught:
        start(api, ready_timeout_s=5)
    assert caught.value.temporary and api.objects == {}


def test_an_existing_job_is_not_touched():
    api = FakeAgentsApi(job_exists=True)
    with pytest.raises(ProvisionError, match="exists already"):
        start(api)
    assert ("Job", agent_pods.job_name(RUN)) in api.objects
    assert not any(c[0] == "delete" for c in api.calls)


def test_stop_deletes_the_job_in_the_background_and_its_secret_and_service():
    api = FakeAgentsApi(lag=1)
    handles = start(api)
    name = agent_pods.job_name(RUN)
    done = agent_pods.stop_agent_pods(handles, topology(), RUN, core=api, batch=api)
    assert done == [f"deleted Job perf/{name}", f"deleted Secret perf/{name}-token",
                    f"deleted Service perf/{name}"]
    assert ("delete", "Job", name, {"propagation_policy": "Background"}) in api.calls
    assert agent_pods.stop_agent_pods([], topology(), RUN, core=api, batch=api) == []


# -- the port-forward, against a stand-in agent ----------------------------------------------------

class StandInAgent:
    """An HTTP server answering like an agent (bearer token, JSON), on a loopback port."""

    def __init__(self) -> None:
        self.shutdowns = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, body: dict) -> None:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's naming
                assert self.path == "/clock"
                self._reply({"ns": 1})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.shutdowns += 1
                self._reply({"done": True})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = self.server.server_address
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakePortForward:
    """Shaped like kubernetes.stream's PortForward: ``socket(port)`` is the stream's end."""

    opened: list[tuple[str, str, int]] = []

    def __init__(self, address):
        self._socket = socket.create_connection(address)

    def socket(self, port):
        assert port == 7070
        return self._socket


@pytest.fixture
def stand_in(monkeypatch):
    agent = StandInAgent()
    FakePortForward.opened = []

    def open_portforward(core, pod, namespace, port):
        FakePortForward.opened.append((pod, namespace, port))
        return FakePortForward(agent.address)

    monkeypatch.setattr(agent_pods, "open_portforward", open_portforward)
    yield agent
    agent.close()


def test_port_forwarded_handles_reach_their_pods_and_stop_them(stand_in):
    api = FakeAgentsApi(lag=1)
    handles = start(api, count=2)
    assert all(h.host == "127.0.0.1" and h.port != 7070 for h in handles)
    results: list = []
    threads = [threading.Thread(target=lambda h=h: results.append(h.clock()))
               for h in handles * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [protocol.Clock(1)] * 6
    assert len(FakePortForward.opened) == 6  # one stream per connection
    assert {pod for pod, _, _ in FakePortForward.opened} == {
        f"{agent_pods.job_name(RUN)}-{i}-abcde" for i in (0, 1)}
    handles[0].stop()
    assert stand_in.shutdowns == 1
    with pytest.raises(AgentError, match="agent 0 GET /clock"):
        handles[0].clock()
    handles[1].stop()


def test_a_refused_stream_is_an_agent_error_not_a_hang(monkeypatch):
    def refused(*args):
        raise FakeApiError(0, "Handshake status 403 Forbidden")

    monkeypatch.setattr(agent_pods, "open_portforward", refused)
    forwarder = agent_pods.PortForwarder(lambda: agent_pods.open_portforward(), 7070, "pod")
    handle = AgentHandle(0, "127.0.0.1", forwarder.port, TOKEN)
    with pytest.raises(AgentError, match="agent 0 GET /snapshot"):
        handle.snapshot(timeout_s=5)
    forwarder.close()


def test_the_provisioner_reaches_management_through_a_port_forward(monkeypatch):
    opened = []

    def open_portforward(core, pod, namespace, port):
        opened.append((pod, namespace, port))

    monkeypatch.setattr(rk, "open_portforward", open_portforward)
    seen = []

    class Recording(FakeManagement):
        def __init__(self, host, port, username, password):
            super().__init__(host, port, username, password)
            seen.append((host, port))

    operator, clock = FakeOperator(lag=1), FakeClock()
    prov = rk.RabbitKubernetesProvisioner(topology(queues=[]), custom=operator, core=operator,
                                          streams=object(), reach="port-forward",
                                          management=Recording, clock=clock, sleep=clock.sleep)
    prov.up()
    prov.sample()
    assert seen and all(host == "127.0.0.1" for host, _ in seen)
    assert len(prov._forwarders) == 1
    prov.down()
    assert prov._forwarders == {}
