"""Document 003's Native HA queue managers on Kubernetes, through the IBM MQ operator.

``render(topology)`` fills the templates in ``k8s/mq/`` (see their header for the convention:
``${name}`` scalars, whole-line ``${name}`` blocks, ``#% if flag`` sections): one ConfigMap with
the mqsc and ini files, shared by all members, and one ``QueueManager`` per member started at
provisioning. Member *i* is queue manager ``ibmmq.qm_name(i)`` (PERF0, PERF1 ...), a
QueueManager object of that name in lower case, run by the operator as three pods (one active
instance, two replicas). A scale-out adds the next QueueManager; a scale-in deletes one.

``NativeHaProvisioner`` applies them with the official ``kubernetes`` client (the ``k8s`` extra),
imported only when a provisioner talks to a cluster, so rendering needs nothing beyond PyYAML.
"""

from __future__ import annotations

import dataclasses
import os
import re
import string
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ProvisionError
from orchestrator.mqspecs import MqSpec, NativeHaSpec
from orchestrator.specs import TopologySpec
from topologies.base import BrokerSample, Member, MemberSample

TEMPLATES = Path(__file__).resolve().parents[2] / "k8s" / "mq"
QUEUE_MANAGER_TEMPLATE = "queuemanager.yaml"
CONFIGMAP_TEMPLATE = "configmap-mqsc-ini.yaml"

GROUP, VERSION, PLURAL = "mq.ibm.com", "v1beta1", "queuemanagers"
RUNNING = "Running"  # status.phase of a QueueManager whose active instance serves
LISTENER_PORT = 1414
WEB_PORT = 9443  # the MQ web console's port; document 003 disables the console
POLL_INTERVAL_S = 5.0
MANAGED_BY = "app.kubernetes.io/managed-by"
PART_OF = "app.kubernetes.io/part-of"
# IBM's "Viewing the status of Native HA queue managers" selects a queue manager's pods with
# app.kubernetes.io/instance=<QueueManager name>.
POD_SELECTOR = "app.kubernetes.io/instance={name}"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1123: namespaces
_SERVICE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1035: Services
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_MQ_NAME = re.compile(r"^[A-Za-z0-9._/%]{1,48}$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_TOKEN = re.compile(r"^[A-Za-z0-9._-]+$")
_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\$\{(?P<name>\w+)\}[ \t]*$")


# -- templates --------------------------------------------------------------------------------

def fill_template(text: str, values: Mapping[str, object],
                  blocks: Mapping[str, str] | None = None,
                  flags: Mapping[str, bool] | None = None) -> str:
    """Fill a template of ``k8s/`` (the convention is in its header): keep ``#% if flag``
    sections whose flag is true, drop whole-line comments, expand whole-line block placeholders
    from ``blocks`` (each line indented like the placeholder, taken literally), then substitute
    ``${name}`` scalars from ``values``. A placeholder or flag without a value is an error,
    never left in the output."""
    blocks, flags = blocks or {}, flags or {}
    kept: list[str] = []
    open_flags: list[bool] = []
    for number, line in enumerate(text.splitlines(), start=1):
        directive = line.strip()
        if directive.startswith("#% if "):
            flag = directive.removeprefix("#% if ").strip()
            if flag not in flags:
                raise KeyError(f"line {number}: no value for flag {flag!r}")
            open_flags.append(bool(flags[flag]))
            continue
        if directive == "#% endif":
            if not open_flags:
                raise ValueError(f"line {number}: #% endif without #% if")
            open_flags.pop()
            continue
        if not all(open_flags) or directive.startswith("#"):
            continue
        block = _BLOCK.match(line)
        if block and block["name"] in blocks:
            kept += [block["indent"] + part.replace("$", "$$") if part else part
                     for part in blocks[block["name"]].splitlines()]
        else:
            kept.append(line)
    if open_flags:
        raise ValueError("#% if without #% endif")
    for name, value in values.items():
        if "\n" in str(value):
            raise ValueError(f"scalar {name!r} holds a line break; pass it as a block")
    try:
        return string.Template("\n".join(kept) + "\n").substitute(values)
    except KeyError as missing:
        raise KeyError(f"no value for placeholder ${{{missing.args[0]}}}") from None


def _render_file(path: Path, values: Mapping[str, object],
                 blocks: Mapping[str, str] | None = None,
                 flags: Mapping[str, bool] | None = None) -> dict[str, Any]:
    try:
        text = fill_template(path.read_text(), values, blocks, flags)
    except (KeyError, ValueError) as error:
        raise ProvisionError(f"template {path}: {error.args[0]}") from None
    except OSError as error:
        raise ProvisionError(f"cannot read template {path}: {error.strerror}") from None
    return yaml.safe_load(text)


# -- rendering --------------------------------------------------------------------------------

def k8s_name(name: str) -> str:
    """A Kubernetes object name for an MQ name: lower case, characters other than letters,
    digits and ``-`` turned into ``-``, starting with a letter (``PERF0`` -> ``perf0``). The
    operator names the queue manager's Service ``<name>-ibm-mq``, a DNS label, hence the letter."""
    lowered = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not lowered or not lowered[0].isalpha():
        lowered = "qm-" + lowered
    return lowered


def configmap_name(topology: TopologySpec) -> str:
    """The shared mqsc/ini ConfigMap: ``<qm_prefix>-mqsc-ini`` (``perf-mqsc-ini``)."""
    return f"{k8s_name(_mq(topology).qm_prefix)}-mqsc-ini"


def object_name(topology: TopologySpec, index: int) -> str:
    """The QueueManager object of member ``index`` (``perf0``)."""
    return k8s_name(_mq(topology).qm_name(index))


def cpu_quantity(cores: float) -> str:
    """Cores as a Kubernetes CPU quantity: ``32`` for 32.0, ``500m`` for 0.5."""
    if float(cores).is_integer():
        return str(int(cores))
    return f"{round(cores * 1000)}m"


def queue_definitions(topology: TopologySpec) -> str:
    """``queues.mqsc``: one ``define qlocal`` per queue name of the topology (patterns
    expanded), each with the topology's MAXDEPTH."""
    depth = _native_ha(topology).max_depth
    return "".join(f"define qlocal({name}) maxdepth({depth}) replace\n"
                   for queue in topology.queues for name in queue.names)


def ini_stanzas(topology: TopologySpec) -> str:
    """``fastpath.ini``: the topology's ``ibmmq.ini`` in qm.ini syntax, ``Stanza:`` then
    ``   Key=Value`` lines."""
    lines = []
    for stanza, entries in _mq(topology).ini.items():
        lines.append(f"{stanza}:")
        lines += [f"   {key}={value}" for key, value in entries.items()]
    return "".join(line + "\n" for line in lines)


def render_configmap(topology: TopologySpec, templates: Path = TEMPLATES) -> dict[str, Any]:
    """The ConfigMap with the mqsc files (disable, disable-tls, nha, queues) and fastpath.ini."""
    _check(topology)
    mq, ha = _mq(topology), _native_ha(topology)
    values = {"configmap": configmap_name(topology), "namespace": ha.namespace,
              "topology": topology.name, "max_message_length": ha.max_message_length,
              "channel": mq.channel, "sharecnv": mq.sharecnv,
              "image_log_length": ha.image_log_length}
    blocks = {"queue_definitions": queue_definitions(topology),
              "ini_stanzas": ini_stanzas(topology)}
    return _render_file(templates / CONFIGMAP_TEMPLATE, values, blocks)


def render_member(topology: TopologySpec, index: int, templates: Path = TEMPLATES
                  ) -> dict[str, Any]:
    """The QueueManager of member ``index`` (for provisioning and for a scale-out)."""
    _check(topology)
    if not 0 <= index < topology.members:
        raise ProvisionError(f"member {index} does not exist: topology {topology.name} has "
                             f"members 0 to {topology.members - 1}")
    mq, ha = _mq(topology), _native_ha(topology)
    values = {"name": object_name(topology, index), "namespace": ha.namespace,
              "topology": topology.name, "version": ha.version, "license": ha.license,
              "use": ha.use, "tls_secret": ha.tls_secret or "", "qm_name": mq.qm_name(index),
              "storage_class": ha.storage_class, "configmap": configmap_name(topology),
              "channel_mqsc": "disable-tls.mqsc" if ha.tls_secret else "disable.mqsc",
              "log_file_pages": ha.log_file_pages, "memory": ha.memory,
              "cpu": cpu_quantity(topology.cpu_per_member) if topology.cpu_per_member else ""}
    flags = {"tls": ha.tls_secret is not None, "cpu": topology.cpu_per_member is not None}
    return _render_file(templates / QUEUE_MANAGER_TEMPLATE, values, flags=flags)


def render(topology: TopologySpec, templates: Path = TEMPLATES) -> list[dict[str, Any]]:
    """Every object ``up()`` applies: the ConfigMap, then the QueueManagers of the ``start``
    members."""
    return [render_configmap(topology, templates)] + [
        render_member(topology, index, templates) for index in range(topology.start)]


def _mq(topology: TopologySpec) -> MqSpec:
    if topology.broker != "ibmmq" or topology.ibmmq is None:
        raise ProvisionError(f"topology {topology.name} is not an IBM MQ topology (broker "
                             f"{topology.broker}); Native HA needs broker ibmmq")
    return topology.ibmmq


def _native_ha(topology: TopologySpec) -> NativeHaSpec:
    mq = _mq(topology)
    if topology.placement != "kubernetes" or mq.native_ha is None:
        raise ProvisionError(f"topology {topology.name} is not a Native HA topology: it needs "
                             f"placement kubernetes and an ibmmq.native_ha section (placement "
                             f"{topology.placement}, native_ha "
                             f"{'set' if mq.native_ha else 'missing'})")
    return mq.native_ha


def _check(topology: TopologySpec) -> None:
    """Every value that goes into a manifest, checked before it is substituted verbatim."""
    mq, ha = _mq(topology), _native_ha(topology)
    problems = []

    def need(ok: object, what: str) -> None:
        if not ok:
            problems.append(what)

    need(_DNS_LABEL.match(ha.namespace), f"ibmmq.native_ha.namespace {ha.namespace!r} is not a "
                                         f"Kubernetes namespace name")
    need(_DNS_SUBDOMAIN.match(ha.storage_class), f"ibmmq.native_ha.storage_class "
                                                 f"{ha.storage_class!r} is not a Kubernetes name")
    need(ha.tls_secret is None or (_DNS_SUBDOMAIN.match(ha.tls_secret)
                                   and len(ha.tls_secret) <= 244),
         f"ibmmq.native_ha.tls_secret {ha.tls_secret!r} is not a Kubernetes name")
    need(_QUANTITY.match(ha.memory), f"ibmmq.native_ha.memory {ha.memory!r} is not a Kubernetes "
                                     f"quantity such as 16Gi")
    need(_TOKEN.match(ha.version), f"ibmmq.native_ha.version {ha.version!r} is not a version "
                                   f"such as 9.3.3.0-r2")
    need(_TOKEN.match(ha.license), f"ibmmq.native_ha.license {ha.license!r} is not a license id")
    need(_MQ_NAME.match(mq.channel) and len(mq.channel) <= 20,
         f"ibmmq.channel {mq.channel!r} is not an MQ channel name")
    for index in range(topology.members):
        qm = mq.qm_name(index)
        need(_MQ_NAME.match(qm), f"queue manager name {qm!r} is not an MQ name")
        need(_SERVICE_NAME.match(f"{k8s_name(qm)}-ibm-mq"),
             f"queue manager {qm} gives the Service name {k8s_name(qm)}-ibm-mq, too long for "
             f"Kubernetes")
    for queue in topology.queues:
        bad = [name for name in queue.names if not _MQ_NAME.match(name)]
        need(not bad, f"queue names {bad[:3]} are not MQ object names (A-Z a-z 0-9 . _ / %, "
                      f"at most 48)")
    for stanza, entries in mq.ini.items():
        need(re.match(r"^[A-Za-z][A-Za-z0-9]*$", stanza), f"ibmmq.ini stanza {stanza!r} is not "
                                                          f"a qm.ini stanza name")
        for key, value in entries.items():
            need(re.match(r"^[A-Za-z][A-Za-z0-9]*$", key) and "\n" not in str(value),
                 f"ibmmq.ini.{stanza}.{key} is not a qm.ini key=value line")
    if problems:
        raise ProvisionError(f"topology {topology.name} cannot be rendered for the MQ operator: "
                             + "; ".join(problems))


# -- the cluster ------------------------------------------------------------------------------

def kubernetes_clients() -> tuple[Any, Any]:
    """``(CustomObjectsApi, CoreV1Api)`` for the cluster of ``$KUBECONFIG`` (or
    ``~/.kube/config``), or the cluster this process runs in."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise ProvisionError("Native HA needs the kubernetes package: pip install "
                             "'surge[k8s]'") from None
    kubeconfig = os.environ.get("KUBECONFIG")
    default = Path("~/.kube/config").expanduser()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)
        elif default.exists():
            config.load_kube_config(config_file=str(default))
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            raise ProvisionError("no Kubernetes configuration: set KUBECONFIG, create "
                                 "~/.kube/config, or run surge inside the cluster")
    except (config.ConfigException, OSError, yaml.YAMLError) as error:
        where = kubeconfig or (default if default.exists() else "the in-cluster service account")
        raise ProvisionError(f"cannot load the Kubernetes configuration from {where}: "
                             f"{error}") from None
    return client.CustomObjectsApi(), client.CoreV1Api()


def _api_status(error: BaseException) -> int | None:
    """The HTTP status of a kubernetes client ``ApiException`` (None for anything else)."""
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


class NativeHaProvisioner:
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
        self.ha = _native_ha(topology)
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
        mq = _mq(self.topology)
        name = mq.qm_name(index)
        host = f"{object_name(self.topology, index)}-ibm-mq.{self.namespace}.svc"
        return Member(index=index, name=name, host=host, amqp_port=LISTENER_PORT,
                      management_port=WEB_PORT, prometheus_port=mq.exporter_port_base,
                      client_url=f"mq://{host}({LISTENER_PORT})/{name}?channel={mq.channel}")

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
        self._call(self.custom.delete_namespaced_custom_object, GROUP, VERSION, self.namespace,
                   PLURAL, name, grace_period_seconds=grace, propagation_policy="Background",
                   missing_ok=True)
        if kill:
            self._call(self.core.delete_collection_namespaced_pod, self.namespace,
                       label_selector=POD_SELECTOR.format(name=name), grace_period_seconds=0)

    def sample(self) -> BrokerSample:
        """Which members run now. CPU, connections and queue depths are not read here: they
        come from IBM's ``mq_prometheus`` exporter of each queue manager
        (:mod:`topologies.mq.metrics`), so ``cpu_seconds`` is None and there are no depths."""
        return BrokerSample([MemberSample(name=m.name, running=m.running, cpu_seconds=None,
                                          cpu_quota_cores=self.topology.cpu_per_member)
                             for m in self.status()])

    def settled_queue_depths(self) -> dict[str, int]:
        """Empty: the Kubernetes API knows nothing of queue depths, and without the exporter (or
        an MQI connection to each active instance) there is nowhere to read them from, so the
        final accounting reports the messages still queued as unknown."""
        return {}

    def down(self) -> list[str]:
        """Delete the QueueManagers this topology labelled as its own and the ConfigMap, then
        wait until the QueueManagers are gone; says what it deleted. Persistent volume claims
        of the queue managers' pods are left to the operator and the storage class."""
        done = []
        for name in sorted(self._phases()):
            self._call(self.custom.delete_namespaced_custom_object, GROUP, VERSION,
                       self.namespace, PLURAL, name, propagation_policy="Background",
                       missing_ok=True)
            done.append(f"deleted QueueManager {self.namespace}/{name}")
        configmap = configmap_name(self.topology)
        if self._call(self.core.delete_namespaced_config_map, configmap, self.namespace,
                      missing_ok=True) is not _MISSING:
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
        if self._call(self.core.create_namespaced_config_map, self.namespace, body,
                      exists_ok=True) is _EXISTS:
            self._call(self.core.replace_namespaced_config_map, name, self.namespace, body)

    def _apply_member(self, index: int) -> str:
        body = render_member(self.topology, index, self.templates)
        name = body["metadata"]["name"]
        if self._call(self.custom.create_namespaced_custom_object, GROUP, VERSION,
                      self.namespace, PLURAL, body, exists_ok=True) is _EXISTS:
            current = self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION,
                                 self.namespace, PLURAL, name)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self._call(self.custom.replace_namespaced_custom_object, GROUP, VERSION,
                       self.namespace, PLURAL, name, body)
        return name

    def _phases(self) -> dict[str, str | None]:
        """Phase of every QueueManager of this topology, by object name."""
        listing = self._call(self.custom.list_namespaced_custom_object, GROUP, VERSION,
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
                    if _api_status(error) is None:
                        raise
                    last[name] = f"API error {_api_status(error)} {getattr(error, 'reason', '')}"
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

    def _selector(self) -> str:
        return f"{MANAGED_BY}=surge,{PART_OF}={self.topology.name}"

    def _call(self, method: Callable[..., Any], *args: Any, exists_ok: bool = False,
              missing_ok: bool = False, **kwargs: Any) -> Any:
        """Call the API; 409 (exists) and 404 (missing) become markers where they are expected,
        every other API error a ProvisionError naming the call."""
        try:
            return method(*args, **{k: v for k, v in kwargs.items() if v is not None})
        except Exception as error:
            status = _api_status(error)
            if status is None:
                raise
            if status == 409 and exists_ok:
                return _EXISTS
            if status == 404 and missing_ok:
                return _MISSING
            reason = getattr(error, "reason", "") or ""
            hint = {401: "the kubeconfig's credentials were refused",
                    403: "the kubeconfig's user may not do this in the namespace",
                    404: f"does the namespace {self.namespace} exist, and is the MQ operator "
                         f"(CRD queuemanagers.mq.ibm.com) installed?"}.get(status, "")
            raise ProvisionError(f"Kubernetes API {method.__name__} failed: {status} {reason}"
                                 + (f" ({hint})" if hint else ""),
                                 temporary=status >= 500 or status == 429) from None


_EXISTS = object()
_MISSING = object()
