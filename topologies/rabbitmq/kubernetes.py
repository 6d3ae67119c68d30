"""RabbitMQ on Kubernetes through the RabbitMQ Cluster Operator (``placement: kubernetes``).

:func:`render` fills ``k8s/rabbitmq/rabbitmqcluster.yaml`` into a ``RabbitmqCluster``
(rabbitmq.com/v1beta1) and :class:`RabbitKubernetesProvisioner` applies it with the official
``kubernetes`` client (the ``k8s`` extra, imported only when a cluster is asked). What the
operator makes of a cluster named N in namespace S (its ``rabbitmqcluster_types.go``, resource
builders and "Using the RabbitMQ Cluster Kubernetes Operator" guide): a StatefulSet ``N-server``
whose pods are ``N-server-<i>``, reached as ``N-server-<i>.N-nodes.S`` through the headless
Service ``N-nodes`` and named ``rabbit@N-server-<i>.N-nodes.S`` as RabbitMQ nodes; a client Service
``N`` (AMQP 5672, management 15672, Prometheus 15692); the Secret ``N-default-user`` with the
generated administrator's ``username`` and ``password`` (there is no guest user to fall back on);
pods labelled ``app.kubernetes.io/name=N``; and on the object the status conditions
AllReplicasReady, ClusterAvailable, NoWarnings and ReconcileSuccess.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.base import BrokerSample, Member, Provisioner
from topologies.kube import (
    EXISTS,
    MISSING,
    PortForwarder,
    api_call,
    dig,
    exec_in_pod,
    load_kubernetes,
    open_portforward,
    pod_ready,
    pod_trouble,
    stream_core,
)
from topologies.rabbitmq import node, queues
from topologies.rabbitmq.management import Management, management_stats
from topologies.rabbitmq.manifests import (
    AMQP_PORT,
    GROUP,
    MANAGEMENT_PORT,
    PLURAL,
    POLL_INTERVAL_S,
    PROMETHEUS_PORT,
    READY,
    TEMPLATES,
    VERSION,
    cluster_name,
    kubernetes_of,
    render,
)
from topologies.rabbitmq.sample import broker_sample

# -- the provisioner ----------------------------------------------------------------------------

class RabbitKubernetesProvisioner(Provisioner):
    """A RabbitMQ cluster run by the cluster operator (a :class:`topologies.base.Provisioner`).

    The pool is the StatefulSet's ordinals: members ``0 .. spec.replicas-1`` run, a scale-out
    raises ``spec.replicas`` by one (the operator then runs ``rabbitmq-queues rebalance all``).
    Scaling in is not possible: the operator refuses to lower ``spec.replicas``.

    ``custom``/``core`` are a ``CustomObjectsApi`` and ``CoreV1Api``, ``streams`` a CoreV1Api kept
    for port-forward and exec streams; by default all come from the kubeconfig when first needed.
    ``reach`` says how the management API of member *i* is reached: ``direct`` at
    ``N-server-<i>.N-nodes.S:15672`` (surge runs in the cluster), ``port-forward`` through the API
    server to that pod, or ``auto`` (direct where ``$KUBERNETES_SERVICE_HOST`` is set).
    ``management(host, port, username, password)`` makes the API clients; ``exec_command(pod,
    argv)`` runs a command in a member's container; ``clock``/``sleep`` are for tests.
    """

    def __init__(self, topology: TopologySpec, custom: Any = None, core: Any = None,
                 streams: Any = None, reach: str = "auto",
                 management: Callable[[str, int, str, str], Management] = Management,
                 exec_command: Callable[[str, list[str]], str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 poll_interval_s: float = POLL_INTERVAL_S, templates: Path = TEMPLATES):
        self.topology, self.spec = topology, kubernetes_of(topology)
        self.namespace, self.name = self.spec.namespace, cluster_name(topology)
        self._custom, self._core, self._streams = custom, core, streams
        if reach == "auto":
            reach = "direct" if os.environ.get("KUBERNETES_SERVICE_HOST") else "port-forward"
        self.reach = reach
        self._management, self._exec = management, exec_command or self._exec_in_pod
        self._clock, self._sleep, self.poll_interval_s = clock, sleep, poll_interval_s
        self.templates = templates
        self._credentials: tuple[str, str] | None = None
        self._forwarders: dict[tuple[int, int], PortForwarder] = {}

    # -- the pool ---------------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Member ``index``: pod ``N-server-<index>`` through the headless Service ``N-nodes``.
        Clients connect with the operator's credentials (:meth:`client_settings`)."""
        host = f"{self.name}-server-{index}.{self.name}-nodes.{self.namespace}"
        return Member(index=index, name=f"rabbit@{host}", host=host, port=AMQP_PORT,
                      management_port=MANAGEMENT_PORT, prometheus_port=PROMETHEUS_PORT,
                      endpoint=node.amqp_url(host, AMQP_PORT))

    def up(self) -> list[Member]:
        """Apply the RabbitmqCluster with ``start`` replicas (an existing one keeps a larger
        count: the operator would refuse fewer), wait until AllReplicasReady, declare the
        queues; returns the pool's status."""
        current = self._cluster()
        replicas = max(self.topology.start, dig(current, "spec", "replicas") or 0)
        body = render(self.topology, replicas, templates=self.templates)
        if api_call(self.custom.create_namespaced_custom_object, GROUP, VERSION, self.namespace,
                    PLURAL, body, exists_ok=True, hint404=self._hint404()) is EXISTS:
            current = current or self._cluster() or {}
            body["metadata"]["resourceVersion"] = dig(current, "metadata", "resourceVersion")
            api_call(self.custom.replace_namespaced_custom_object, GROUP, VERSION,
                     self.namespace, PLURAL, self.name, body)
        self._wait_ready(replicas)
        self._declare_queues(list(range(replicas)))
        return self.status()

    def status(self) -> list[Member]:
        """Every member of the pool: running when below ``spec.replicas`` and its pod is Ready."""
        cluster = self._cluster()
        replicas = (dig(cluster, "spec", "replicas") or 0) if cluster else 0
        ready = self._ready_pods()[0] if cluster else set()
        if cluster and self._credentials is None:
            self._read_credentials()
        return [dataclasses.replace(self.member(i), running=i < replicas and i in ready)
                for i in range(self.topology.members)]

    def start_member(self, index: int | None = None) -> Member:
        """Raise ``spec.replicas`` by one and wait until the new pod is Ready; its per-member
        queues are declared through it. ``index`` may only be the next ordinal (or one that
        runs). Even member counts are allowed, though the operator's guide discourages them."""
        cluster = self._cluster()
        if cluster is None:
            raise ProvisionError(f"RabbitmqCluster {self.namespace}/{self.name} does not exist; "
                                 f"run up first")
        replicas = dig(cluster, "spec", "replicas") or 0
        if index is not None and index < replicas:
            self._wait_ready(replicas)
            return self.status()[index]
        if replicas >= self.topology.members:
            raise ProvisionError(f"all {self.topology.members} members of {self.topology.name} "
                                 f"run already (spec.replicas {replicas})")
        if index is not None and index != replicas:
            raise ProvisionError(f"member {index} cannot start before member {replicas}: the "
                                 f"StatefulSet {self.name}-server adds pods in order")
        api_call(self.custom.patch_namespaced_custom_object, GROUP, VERSION, self.namespace,
                 PLURAL, self.name, {"spec": {"replicas": replicas + 1}})
        self._wait_ready(replicas + 1)
        self._declare_queues([replicas])
        return self.status()[replicas]

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Not supported gracefully: the RabbitMQ cluster operator does not scale down (it
        refuses to lower ``spec.replicas``; since 2.16.0 it only scales to zero and back), so
        this raises a ProvisionError. With ``kill`` (fault injection) the member's pod is
        deleted with no grace period; its StatefulSet starts it again, like a crashed node that
        restarts."""
        if not kill:
            raise ProvisionError(
                f"cannot stop member {index} of RabbitmqCluster {self.namespace}/{self.name}: "
                f"the RabbitMQ cluster operator does not support scaling down (it refuses to "
                f"lower spec.replicas); kill the member's pod instead (a fault: the StatefulSet "
                f"restarts it) or take the whole cluster down")
        api_call(self.core.delete_namespaced_pod, f"{self.name}-server-{index}", self.namespace,
                 grace_period_seconds=0, missing_ok=True)

    def sample(self) -> BrokerSample:
        """Which members run, and from the management API (where a member answers) connections
        and messages moved per member. CPU is unknown: the pods' CPU
        is the kubelet's to report (metrics-server, Prometheus), not the API server's."""
        members = self.status()
        running = [m for m in members if m.running]
        try:
            api = self._api(running[0].index) if running else None
        except ProvisionError:
            api = None
        return broker_sample(members, lambda member: None, self.topology.cpu_per_member,
                             stats=management_stats(api))

    def client_settings(self) -> dict[str, Any]:
        """The operator's generated administrator (there is no guest user), read from its
        Secret; they reach agents only in their control messages."""
        if self._credentials is None:
            self._read_credentials()
        if self._credentials is None:
            raise ProvisionError(f"no credentials in Secret {self.namespace}/{self.name}-default-"
                                 f"user yet", temporary=True)
        user, password = self._credentials
        return {"user": user, "password": password}

    def settled_queue_depths(self) -> dict[str, int]:
        """Messages per queue from the queue processes themselves (``rabbitmqctl list_queues``
        run in a Ready member's container): the management figures lag behind."""
        running = [m for m in self.status() if m.running]
        if not running:
            raise ProvisionError(f"no member of {self.topology.name} runs", temporary=True)
        return node.parse_queue_listing(self._exec(f"{self.name}-server-{running[0].index}",
                                                   ["rabbitmqctl", *node.LIST_QUEUES]))

    def down(self) -> list[str]:
        """Delete the RabbitmqCluster (the operator's StatefulSet, Services and Secrets go with
        it), wait until it is gone, and delete its pods' volume claims
        ``persistence-N-server-<i>`` so that the next up starts blank; says what it did."""
        for forwarder in self._forwarders.values():
            forwarder.close()
        self._forwarders.clear()
        done = []
        if api_call(self.custom.delete_namespaced_custom_object, GROUP, VERSION, self.namespace,
                    PLURAL, self.name, missing_ok=True) is not MISSING:
            done.append(f"deleted RabbitmqCluster {self.namespace}/{self.name}")
        deadline = self._clock() + self.spec.ready_timeout
        while self._cluster() is not None:
            if self._clock() >= deadline:
                raise ProvisionError(f"RabbitmqCluster {self.namespace}/{self.name} still exists "
                                     f"{self.spec.ready_timeout:g}s after its deletion",
                                     temporary=True)
            self._sleep(self.poll_interval_s)
        for index in range(self.topology.members):
            claim = f"persistence-{self.name}-server-{index}"
            if api_call(self.core.delete_namespaced_persistent_volume_claim, claim,
                        self.namespace, missing_ok=True) is not MISSING:
                done.append(f"deleted PersistentVolumeClaim {self.namespace}/{claim}")
        self._credentials = None
        return done

    # -- internals -------------------------------------------------------------------------------

    @property
    def custom(self) -> Any:
        """The CustomObjectsApi (from the kubeconfig on first use)."""
        if self._custom is None:
            self._custom = load_kubernetes().CustomObjectsApi()
        return self._custom

    @property
    def core(self) -> Any:
        """The CoreV1Api (from the kubeconfig on first use)."""
        if self._core is None:
            self._core = load_kubernetes().CoreV1Api()
        return self._core

    @property
    def streams(self) -> Any:
        """The CoreV1Api for port-forward and exec streams (its own ApiClient)."""
        if self._streams is None:
            self._streams = stream_core(load_kubernetes())
        return self._streams

    def _hint404(self) -> str:
        return (f"does the namespace {self.namespace} exist, and is the RabbitMQ cluster "
                f"operator (CRD rabbitmqclusters.rabbitmq.com) installed?")

    def _cluster(self) -> dict | None:
        found = api_call(self.custom.get_namespaced_custom_object, GROUP, VERSION,
                         self.namespace, PLURAL, self.name, missing_ok=True,
                         hint404=self._hint404())
        return None if found is MISSING else found

    def _ready_pods(self) -> tuple[set[int], list[str]]:
        """Ordinals of this cluster's Ready pods, and what keeps any pod from starting."""
        listing = api_call(self.core.list_namespaced_pod, self.namespace,
                           label_selector=f"app.kubernetes.io/name={self.name}")
        ready, trouble, prefix = set(), [], f"{self.name}-server-"
        for pod in dig(listing, "items") or []:
            name = dig(pod, "metadata", "name") or ""
            ordinal = name.removeprefix(prefix)
            if name.startswith(prefix) and ordinal.isdigit() and pod_ready(pod):
                ready.add(int(ordinal))
            if (problem := pod_trouble(pod)) is not None:
                trouble.append(f"pod {name}: {problem}")
        return ready, trouble

    def _wait_ready(self, replicas: int) -> None:
        """Until AllReplicasReady is True for the current generation and pods 0..replicas-1
        are Ready; a timeout (or a pod that cannot start) names the object and its conditions."""
        deadline, last = self._clock() + self.spec.ready_timeout, "not reported yet"
        while True:
            cluster = self._cluster()
            conditions = {dig(c, "type"): c for c in dig(cluster, "status", "conditions") or []}
            observed = dig(cluster, "status", "observedGeneration")
            current = observed is None or observed >= (dig(cluster, "metadata", "generation")
                                                       or 0)
            ready, trouble = self._ready_pods()
            last = "; ".join(f"{kind} {dig(c, 'status')} ({dig(c, 'reason') or ''}"
                             f"{': ' + dig(c, 'message') if dig(c, 'message') else ''})"
                             for kind, c in conditions.items()) or "no conditions yet"
            if cluster is not None and dig(conditions.get(READY), "status") == "True" \
                    and current and set(range(replicas)) <= ready:
                self._read_credentials()
                return
            where = f"RabbitmqCluster {self.namespace}/{self.name}"
            see = f"see `kubectl describe rabbitmqcluster -n {self.namespace} {self.name}`"
            if cluster is not None and trouble:
                raise ProvisionError(f"{where} cannot become ready: {'; '.join(trouble)} "
                                     f"(conditions: {last}); {see}")
            if self._clock() >= deadline:
                raise ProvisionError(
                    f"{where} not ready with {replicas} replicas after "
                    f"{self.spec.ready_timeout:g}s: {'missing' if cluster is None else last}; "
                    f"Ready pods {sorted(ready)}; {see}", temporary=True)
            self._sleep(self.poll_interval_s)

    def _read_credentials(self) -> None:
        secret = api_call(self.core.read_namespaced_secret, f"{self.name}-default-user",
                          self.namespace, missing_ok=True)
        data = dig(secret, "data") if secret is not MISSING else None
        if data and data.get("username") and data.get("password"):
            self._credentials = (base64.b64decode(data["username"]).decode(),
                                 base64.b64decode(data["password"]).decode())

    def _api(self, index: int) -> Management:
        """The management API of member ``index``, with the operator's credentials."""
        if self._credentials is None:
            self._read_credentials()
        if self._credentials is None:
            raise ProvisionError(f"no credentials in Secret {self.namespace}/{self.name}-default-"
                                 f"user yet", temporary=True)
        host, port = self.member(index).host, MANAGEMENT_PORT
        if self.reach == "port-forward":
            key = (index, MANAGEMENT_PORT)
            if key not in self._forwarders:
                pod = f"{self.name}-server-{index}"
                self._forwarders[key] = PortForwarder(
                    lambda: open_portforward(self.streams, pod, self.namespace, MANAGEMENT_PORT),
                    MANAGEMENT_PORT, f"{self.namespace}/{pod}")
            host, port = "127.0.0.1", self._forwarders[key].port
        return self._management(host, port, *self._credentials)

    def _declare_queues(self, members: list[int]) -> None:
        """Declare shared queues and the per-member instances of ``members``, each through the
        member that is to lead it (as the local provisioner does)."""
        queues.declare(self.topology, members, functools.cache(self._api))

    def _exec_in_pod(self, pod: str, argv: list[str]) -> str:
        return exec_in_pod(self.streams, pod, self.namespace, "rabbitmq", argv)
