"""Document 003's Native HA queue managers on Kubernetes, through the IBM MQ operator.

``NativeHaProvisioner`` applies the objects :mod:`topologies.mq.manifests` renders (one
ConfigMap, one ``QueueManager`` per member; the operator runs each as three pods: one active
instance, two replicas) with the official ``kubernetes`` client (the ``k8s`` extra), imported
only when a provisioner talks to a cluster. A scale-out adds the next QueueManager; a scale-in
deletes one.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.base import BrokerSample, Member, MemberSample, Provisioner
from topologies.kube import EXISTS, MISSING, api_call, api_status, load_kubernetes
from topologies.mq.manifests import (
    GROUP,
    LISTENER_PORT,
    MANAGED_BY,
    PART_OF,
    PLURAL,
    POD_SELECTOR,
    POLL_INTERVAL_S,
    RUNNING,
    TEMPLATES,
    VERSION,
    WEB_PORT,
    configmap_name,
    mq_of,
    native_ha_of,
    object_name,
    render_configmap,
    render_member,
)
from topologies.mq.uniform import client_settings

# -- the cluster ------------------------------------------------------------------------------

def kubernetes_clients() -> tuple[Any, Any]:
    """``(CustomObjectsApi, CoreV1Api)`` for the cluster of ``$KUBECONFIG`` (or
    ``~/.kube/config``), or the cluster this process runs in."""
    client = load_kubernetes()
    return client.CustomObjectsApi(), client.CoreV1Api()


class NativeHaProvisioner(Provisioner):
    """Native HA queue managers through the MQ operator (a :class:`topologies.base.Provisioner`).

    ``custom`` and ``core`` are a ``kubernetes.client.CustomObjectsApi`` and ``CoreV1Api``;
    by default they are made from the kubeconfig when first needed. ``clock`` and ``sleep`` are
    there for tests.
    """

    def __init__(self, topology: TopologySpec, custom: Any = None, core: Any = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 poll_interval_s: float = POLL_INTERVAL_S, templates: Path = TEMPLATES):
        self.topology = topology
        self.ha = native_ha_of(topology)
        self.namespace = self.ha.namespace
        self._custom, self._core = custom, core
        self._clock, self._sleep = clock, sleep
        self.poll_interval_s = poll_interval_s
        self.templates = templates

    # -- the pool -------------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Member ``index``: its queue manager and the operator's Service in front of it.

        The MQ operator names a queue manager's objects ``<QueueManager name>-ibm-mq...``: IBM's
        "Testing a mutual TLS connection to a queue manager from your laptop" (MQ 9.3 container
        docs) reads the route ``exampleqm-ibm-mq-qm`` the operator creates for QueueManager
        ``exampleqm``, and published setups reach the listener inside the cluster through the
        Service ``<name>-ibm-mq`` on port 1414 (``native-ha-qm-ibm-mq.mq.svc.cluster.local(1414)``,
        a Route to Service ``qm-ibm-mq`` port 1414). We found no IBM page that states the
        Service name outright. With Native HA only the active instance's pod is ready, so the
        Service sends clients to the instance that serves.
        """
        mq = mq_of(self.topology)
        name = mq.qm_name(index)
        host = f"{object_name(self.topology, index)}-ibm-mq.{self.namespace}.svc"
        return Member(index=index, name=name, host=host, port=LISTENER_PORT,
                      management_port=WEB_PORT, prometheus_port=mq.exporter_port_base,
                      endpoint=f"mq://{host}({LISTENER_PORT})/{name}?channel={mq.channel}")

    def up(self) -> list[Member]:
        """Apply the ConfigMap (create or replace) and the QueueManagers of the ``start``
        members (existing ones are updated in place), wait until each is Running; returns the
        pool's status."""
        self._apply_configmap()
        names = [self._apply_member(index) for index in range(self.topology.start)]
        self._wait_running(names)
        return self.status()

    def status(self) -> list[Member]:
        """Every member of the pool; running when its QueueManager's phase is Running."""
        phases = self._phases()
        return [self._with_running(index, phases.get(object_name(self.topology, index)))
                for index in range(self.topology.members)]

    def start_member(self, index: int | None = None) -> Member:
        """Add the QueueManager of member ``index`` (default: the first one of the pool that
        does not exist) and wait until it is Running."""
        if index is None:
            phases = self._phases()
            idle = [i for i in range(self.topology.members)
                    if object_name(self.topology, i) not in phases]
            if not idle:
                raise ProvisionError(f"all {self.topology.members} queue managers of "
                                     f"{self.topology.name} exist already")
            index = idle[0]
        name = self._apply_member(index)
        self._wait_running([name])
        return self._with_running(index, RUNNING)

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Delete member ``index``'s QueueManager; the operator stops its pods gracefully. With
        ``kill``, a grace period of 0 for the object and its three pods (fault injection)."""
        name = object_name(self.topology, index)
        grace = 0 if kill else None
        self._api(self.custom.delete_namespaced_custom_object, GROUP, VERSION, self.namespace,
                   PLURAL, name, grace_period_seconds=grace, propagation_policy="Background",
                   missing_ok=True)
        if kill:
            self._api(self.core.delete_collection_namespaced_pod, self.namespace,
                       label_selector=POD_SELECTOR.format(name=name), grace_period_seconds=0)

    def sample(self) -> BrokerSample:
        """Which members run now. CPU, connections and queue depths are not read here: they
        come from IBM's ``mq_prometheus`` exporter of each queue manager
        (:mod:`topologies.mq.metrics`), so CPU and depths are unknown here."""
        return BrokerSample([MemberSample(name=m.name, running=m.running, cpu=None,
                                          cpu_quota_cores=self.topology.cpu_per_member)
                             for m in self.status()])

    def client_settings(self) -> dict[str, Any]:
        """The MQ driver's settings (:func:`~topologies.mq.uniform.client_settings`)."""
        return client_settings(self.topology)

    def unreachable_from_controller(self) -> str | None:
        """Why the controller cannot connect to the queue managers as the clients do: their
        Services' names (``*.svc``) resolve only inside the cluster, and outside it (no
        ``KUBERNETES_SERVICE_HOST``) the controller is; ``None`` inside it."""
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return None
        return ("the queue managers' Services (*.svc) are reachable only inside the cluster, "
                "and the controller runs outside it")

    def settled_queue_depths(self) -> dict[str, int] | None:
        """Unknown (``None``): the Kubernetes API knows nothing of queue depths, and without the
        exporter (or an MQI connection to each active instance) there is nowhere to read them
        from, so the final accounting reports the messages still queued as unknown."""
        return None

    def down(self) -> list[str]:
        """Delete the QueueManagers this topology labelled as its own and the ConfigMap, then
        wait until the QueueManagers are gone; says what it deleted. Persistent volume claims
        of the queue managers' pods are left to the operator and the storage class."""
        done = []
        for name in sorted(self._phases()):
            self._api(self.custom.delete_namespaced_custom_object, GROUP, VERSION,
                       self.namespace, PLURAL, name, propagation_policy="Background",
                       missing_ok=True)
            done.append(f"deleted QueueManager {self.namespace}/{name}")
        configmap = configmap_name(self.topology)
        if self._api(self.core.delete_namespaced_config_map, configmap, self.namespace,
                      missing_ok=True) is not MISSING:
            done.append(f"deleted ConfigMap {self.namespace}/{configmap}")
        self._wait_gone()
        return done

    # -- the API --------------------------------------------------------------------------------

    @property
    def custom(self) -> Any:
        """The CustomObjectsApi (made from the kubeconfig on first use)."""
        if self._custom is None:
            self._custom, self._core = kubernetes_clients()
        return self._custom

    @property
    def core(self) -> Any:
        """The CoreV1Api (made from the kubeconfig on first use)."""
        if self._core is None:
            self._custom, self._core = kubernetes_clients()
        return self._core

    def _apply_configmap(self) -> None:
        body = render_configmap(self.topology, self.templates)
        name = body["metadata"]["name"]
        if self._api(self.core.create_namespaced_config_map, self.namespace, body,
                      exists_ok=True) is EXISTS:
            self._api(self.core.replace_namespaced_config_map, name, self.namespace, body)

    def _apply_member(self, index: int) -> str:
        body = render_member(self.topology, index, self.templates)
        name = body["metadata"]["name"]
        if self._api(self.custom.create_namespaced_custom_object, GROUP, VERSION,
                      self.namespace, PLURAL, body, exists_ok=True) is EXISTS:
            current = self._api(self.custom.get_namespaced_custom_object, GROUP, VERSION,
                                 self.namespace, PLURAL, name)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self._api(self.custom.replace_namespaced_custom_object, GROUP, VERSION,
                       self.namespace, PLURAL, name, body)
        return name

    def _phases(self) -> dict[str, str | None]:
        """Phase of every QueueManager of this topology, by object name."""
        listing = self._api(self.custom.list_namespaced_custom_object, GROUP, VERSION,
                             self.namespace, PLURAL, label_selector=self._selector())
        return {item["metadata"]["name"]: (item.get("status") or {}).get("phase")
                for item in listing.get("items", [])}

    def _wait_running(self, names: list[str]) -> None:
        deadline = self._clock() + self.ha.ready_timeout
        last: dict[str, str] = {name: "not reported yet" for name in names}
        waiting = list(names)
        while True:
            for name in list(waiting):
                try:
                    found = self.custom.get_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL, name)
                    last[name] = (found.get("status") or {}).get("phase") or "no phase yet"
                except Exception as error:
                    if api_status(error) is None:
                        raise
                    last[name] = f"API error {api_status(error)} {getattr(error, 'reason', '')}"
                if last[name] == RUNNING:
                    waiting.remove(name)
            if not waiting:
                return
            if self._clock() >= deadline:
                stuck = ", ".join(f"{name} (last phase: {last[name]})" for name in waiting)
                raise ProvisionError(
                    f"QueueManager {stuck} in namespace {self.namespace} not {RUNNING} after "
                    f"{self.ha.ready_timeout:g}s; see `kubectl describe queuemanager -n "
                    f"{self.namespace} {waiting[0]}`", temporary=True)
            self._sleep(self.poll_interval_s)

    def _wait_gone(self) -> None:
        deadline = self._clock() + self.ha.ready_timeout
        while (left := self._phases()):
            if self._clock() >= deadline:
                raise ProvisionError(f"QueueManagers {sorted(left)} in namespace "
                                     f"{self.namespace} still exist {self.ha.ready_timeout:g}s "
                                     f"after their deletion", temporary=True)
            self._sleep(self.poll_interval_s)

    def _with_running(self, index: int, phase: str | None) -> Member:
        return dataclasses.replace(self.member(index), running=phase == RUNNING)

    def _api(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:func:`topologies.kube.api_call`, with this operator's 404 hint."""
        return api_call(method, *args, hint404=f"does the namespace {self.namespace} exist, and "
                        "is the MQ operator (CRD queuemanagers.mq.ibm.com) installed?", **kwargs)

    def _selector(self) -> str:
        return f"{MANAGED_BY}=surge,{PART_OF}={self.topology.name}"


