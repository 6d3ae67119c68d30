"""Load agents as pods: ``surge agent`` processes in an Indexed Job of the run's namespace.

``start_agent_pods`` renders the Secret (the run's token), the Job and a headless Service from the
templates in ``k8s/agents/`` (why a Job and not a Deployment is said in ``job.yaml``), applies
them with the official ``kubernetes`` client (the ``k8s`` extra, imported only here and only when
a cluster is asked), waits until ``count`` agent pods are Ready and returns handles the controller
calls like local agents (``process`` None; their ``closer`` asks the agent to shut down and closes
the port-forward). ``stop_agent_pods`` deletes the run's objects.

How the controller reaches a pod, inside the cluster or outside it: only through the API
server's port-forward, never at the pod's IP. The agent's control API is plain HTTP with the
run's bearer token, so a call to the pod's IP would carry the token in clear across the pod
network; a port-forward carries it inside the API server's TLS and the kubelet's, into the pod's
own network namespace. Each agent gets a :class:`PortForwarder`: a loopback listening socket
whose every accepted connection is carried to the pod's port by its own port-forward stream
(``kubernetes.stream.portforward``, what ``kubectl port-forward`` does; a controller running as a
pod needs RBAC ``create`` on ``pods/portforward``). One stream per connection keeps it simple and
correct: the agent API is one short HTTP/1.0 exchange per connection, so a call costs one extra
WebSocket handshake and nothing is multiplexed. The agent still listens on the pod's address
for the kubelet's readiness probe and for Prometheus, which read the unauthenticated
``/metrics``; nothing sends it the token there.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.agents.client import AgentHandle
from orchestrator.errors import AgentError, ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.assets import asset
from topologies.kube import (
    EXISTS,
    MISSING,
    PortForwarder,
    api_call,
    dig,
    load_kubernetes,
    open_portforward,
    pod_ready,
    pod_trouble,
    stream_core,
)
from topologies.templates import render_file

log = logging.getLogger(__name__)

TEMPLATES = asset("k8s", "agents")
AGENT_PORT = 7070
POLL_INTERVAL_S = 2.0
RUN_LABEL = "surge/run-id"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # set on an Indexed Job's pods
# Waiting reasons after which a pod will not start by itself (an image that is not there).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]{16,}$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")


def job_name(run_id: str) -> str:
    """``surge-agents-<run id in lower case>``, shortened with a hash to stay a DNS label that
    leaves room for the pods' ``-<index>-<random>`` suffix."""
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-") or "run"
    if len(slug) > 30:
        slug = slug[:23].rstrip("-") + "-" + hashlib.sha1(run_id.encode()).hexdigest()[:6]
    return f"surge-agents-{slug}"


def render_agents(count: int, topology: TopologySpec, run_id: str, token: str,
                  max_lifetime_s: float, cpu: str = "1", memory: str = "512Mi",
                  cpu_limit: bool = False, templates: Path = TEMPLATES) -> dict[str, dict]:
    """The run's ``secret``, ``job`` and ``service``, checked before anything is substituted."""
    spec = topology.kubernetes
    if spec is None:
        raise ProvisionError(f"topology {topology.name} has no kubernetes section: agent pods "
                             f"need its namespace and agent_image")
    name = job_name(run_id)
    problems = [what for ok, what in [
        (1 <= count <= 1000, f"count {count} is not between 1 and 1000"),
        (_DNS_LABEL.match(spec.namespace), f"namespace {spec.namespace!r} is not a namespace"),
        (_IMAGE.match(spec.agent_image), f"agent_image {spec.agent_image!r} is not an image"),
        (_QUANTITY.match(cpu), f"cpu {cpu!r} is not a Kubernetes quantity"),
        (_QUANTITY.match(memory), f"memory {memory!r} is not a Kubernetes quantity"),
        (_TOKEN.match(token), "the token is not 16 or more URL-safe characters"),
        (max_lifetime_s >= 1, f"max_lifetime_s {max_lifetime_s} is below one second"),
    ] if not ok]
    if problems:
        raise ProvisionError("agent pods cannot be rendered: " + "; ".join(problems))
    values = {"name": name, "namespace": spec.namespace, "secret": f"{name}-token",
              "run_label": name.removeprefix("surge-agents-"),
              "run_id": re.sub(r"[^A-Za-z0-9._:+@-]", "-", run_id),
              "count": count, "image": spec.agent_image, "port": AGENT_PORT,
              "max_lifetime": int(max_lifetime_s), "deadline": int(max_lifetime_s) + 60,
              "token": token, "cpu": cpu, "memory": memory, "cpu_limit": cpu_limit}
    return {kind: render_file(templates / f"{kind}.yaml", values)
            for kind in ("secret", "job", "service")}


# -- start and stop ------------------------------------------------------------------------------

def _closer(handle: AgentHandle, forwarder: PortForwarder) -> Callable[[float], None]:
    """``AgentHandle.closer`` of an agent pod: ask the agent to shut down (best effort; its pod
    then completes and the Job does not restart it), then close its port-forward."""
    def close(timeout_s: float) -> None:
        with contextlib.suppress(AgentError):
            handle.shutdown(min(5.0, timeout_s))
        forwarder.close()
    return close


def start_agent_pods(count: int, topology: TopologySpec, run_id: str, token: str,
                     max_lifetime_s: float, *, core: Any = None, batch: Any = None,
                     streams: Any = None, cpu: str = "1",
                     memory: str = "512Mi", cpu_limit: bool = False,
                     ready_timeout_s: float | None = None,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep,
                     poll_interval_s: float = POLL_INTERVAL_S,
                     templates: Path = TEMPLATES) -> list[AgentHandle]:
    """Apply the run's Secret, Job and Service, wait until ``count`` agent pods are Ready and
    return their handles by agent index, each reached through a port-forward.
    ``core``/``batch``/``streams`` (CoreV1Api, BatchV1Api, the CoreV1Api for streams) default to
    clients from the kubeconfig. On any failure what was created is deleted again."""
    objects = render_agents(count, topology, run_id, token, max_lifetime_s, cpu, memory,
                            cpu_limit, templates)
    if core is None or batch is None:
        client = load_kubernetes()
        core, batch = core or client.CoreV1Api(), batch or client.BatchV1Api()
    namespace, name = topology.kubernetes.namespace, objects["job"]["metadata"]["name"]
    timeout_s = ready_timeout_s or topology.kubernetes.ready_timeout
    hint = f"does the namespace {namespace} exist?"
    secret, service = objects["secret"], objects["service"]
    if api_call(core.create_namespaced_secret, namespace, secret, exists_ok=True,
                hint404=hint) is EXISTS:
        api_call(core.replace_namespaced_secret, secret["metadata"]["name"], namespace, secret)
    job = api_call(batch.create_namespaced_job, namespace, objects["job"], exists_ok=True,
                   hint404=hint)
    if job is EXISTS:
        raise ProvisionError(f"Job {namespace}/{name} exists already: the agents of run "
                             f"{run_id} run, or were not stopped (stop_agent_pods)")
    try:
        owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                  "uid": dig(job, "metadata", "uid"), "blockOwnerDeletion": False}]
        api_call(core.patch_namespaced_secret, secret["metadata"]["name"], namespace,
                 {"metadata": {"ownerReferences": owner}})
        service["metadata"]["ownerReferences"] = owner
        if api_call(core.create_namespaced_service, namespace, service,
                    exists_ok=True) is EXISTS:
            api_call(core.patch_namespaced_service, name, namespace,
                     {"metadata": {"ownerReferences": owner}})
        pods = _wait_ready(core, namespace, name, count, timeout_s, clock, sleep,
                           poll_interval_s)
        if streams is None:
            streams = stream_core(load_kubernetes())
        return [_handle(pod, position, namespace, token, streams)
                for position, pod in enumerate(pods)]
    except BaseException:
        with contextlib.suppress(Exception):
            _delete(core, batch, namespace, name)
        raise


def stop_agent_pods(handles: list[AgentHandle], topology: TopologySpec, run_id: str, *,
                    core: Any = None, batch: Any = None) -> list[str]:
    """Shut the agents down (``handle.stop()``: their ``closer``), close their port-forwards and
    delete the run's Job (its pods with it), Secret and Service; says what it deleted."""
    for handle in handles:
        handle.stop()
    if topology.kubernetes is None:
        return []
    if core is None or batch is None:
        client = load_kubernetes()
        core, batch = core or client.CoreV1Api(), batch or client.BatchV1Api()
    return _delete(core, batch, topology.kubernetes.namespace, job_name(run_id))


def _delete(core: Any, batch: Any, namespace: str, name: str) -> list[str]:
    done = []
    for kind, method, object_name in (
            ("Job", batch.delete_namespaced_job, name),
            ("Secret", core.delete_namespaced_secret, f"{name}-token"),
            ("Service", core.delete_namespaced_service, name)):
        kwargs = {"propagation_policy": "Background"} if kind == "Job" else {}
        if api_call(method, object_name, namespace, missing_ok=True, **kwargs) is not MISSING:
            done.append(f"deleted {kind} {namespace}/{object_name}")
    return done


def _wait_ready(core: Any, namespace: str, name: str, count: int, timeout_s: float,
                clock: Callable[[], float], sleep: Callable[[float], None],
                poll_interval_s: float) -> list[Any]:
    """The ``count`` Ready agent pods of Job ``name``, sorted by agent index."""
    deadline = clock() + timeout_s
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/name=surge-agent"
    while True:
        pods = dig(api_call(core.list_namespaced_pod, namespace, label_selector=selector),
                     "items") or []
        for pod in pods:
            trouble = pod_trouble(pod)
            if trouble:
                pod_name = dig(pod, "metadata", "name")
                raise ProvisionError(f"agent pod {namespace}/{pod_name} of Job {name} will not "
                                     f"start: {trouble}; see `kubectl describe pod -n "
                                     f"{namespace} {pod_name}`")
        ready = sorted((p for p in pods if pod_ready(p)), key=_index)
        if len(ready) >= count:
            return ready[:count]
        if clock() >= deadline:
            phases = ", ".join(f"{dig(p, 'metadata', 'name')} {dig(p, 'status', 'phase')}"
                               for p in pods) or "no pods yet"
            raise ProvisionError(f"{len(ready)} of {count} agent pods of Job {namespace}/{name} "
                                 f"Ready after {timeout_s:g}s ({phases}); see `kubectl describe "
                                 f"job -n {namespace} {name}`", temporary=True)
        sleep(poll_interval_s)


def _index(pod: Any, default: int = 1 << 30) -> int:
    """The pod's agent index (its Job completion index)."""
    value = (dig(pod, "metadata", "annotations") or {}).get(INDEX_ANNOTATION, "")
    return int(value) if str(value).isdigit() else default


def _handle(pod: Any, position: int, namespace: str, token: str, streams: Any) -> AgentHandle:
    """The handle of one Ready agent pod, through its own port-forward (``process`` None,
    ``closer`` set)."""
    name, index = dig(pod, "metadata", "name"), _index(pod, position)
    forwarder = PortForwarder(lambda: open_portforward(streams, name, namespace, AGENT_PORT),
                              AGENT_PORT, f"{namespace}/{name}")
    handle = AgentHandle(index, "127.0.0.1", forwarder.port, token)
    handle.closer = _closer(handle, forwarder)
    return handle
