"""Document 003's Native HA queue manager as Kubernetes objects, rendered from the Jinja2
templates in ``k8s/mq/`` (see :mod:`topologies.templates` and their header): one ConfigMap with
the mqsc and ini files, shared by all members, and one ``QueueManager`` per member. Member *i* is
queue manager ``ibmmq.qm_name(i)`` (PERF0, PERF1 ...), a QueueManager object of that name in
lower case. Needs nothing beyond PyYAML and Jinja2; :mod:`topologies.mq.nativeha` applies them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.mq import MqSpec, NativeHaSpec
from orchestrator.specs.mqtopics import mqsc_lines, mqsc_name
from orchestrator.specs.topology import TopologySpec
from topologies.assets import asset
from topologies.templates import render_file

TEMPLATES = asset("k8s", "mq")
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


# -- templates --------------------------------------------------------------------------------

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
    return f"{k8s_name(mq_of(topology).qm_prefix)}-mqsc-ini"


def object_name(topology: TopologySpec, index: int) -> str:
    """The QueueManager object of member ``index`` (``perf0``)."""
    return k8s_name(mq_of(topology).qm_name(index))


def cpu_quantity(cores: float) -> str:
    """Cores as a Kubernetes CPU quantity: ``32`` for 32.0, ``500m`` for 0.5."""
    if float(cores).is_integer():
        return str(int(cores))
    return f"{round(cores * 1000)}m"


def queue_definitions(topology: TopologySpec) -> str:
    """``queues.mqsc``: one ``define qlocal`` per queue name of the topology (patterns
    expanded), each with the topology's MAXDEPTH."""
    depth = native_ha_of(topology).max_depth
    lines = [f"define qlocal({mqsc_name(name)}) maxdepth({depth}) replace"
             for queue in topology.queues for name in queue.names]
    return "".join(line + "\n" for line in lines + mqsc_lines(topology))


def ini_stanzas(topology: TopologySpec) -> str:
    """``fastpath.ini``: the topology's ``ibmmq.ini`` in qm.ini syntax, ``Stanza:`` then
    ``   Key=Value`` lines."""
    lines = []
    for stanza, entries in mq_of(topology).ini.items():
        lines.append(f"{stanza}:")
        lines += [f"   {key}={value}" for key, value in entries.items()]
    return "".join(line + "\n" for line in lines)


def render_configmap(topology: TopologySpec, templates: Path = TEMPLATES) -> dict[str, Any]:
    """The ConfigMap with the mqsc files (disable, disable-tls, nha, queues) and fastpath.ini."""
    _check(topology)
    mq, ha = mq_of(topology), native_ha_of(topology)
    values = {"configmap": configmap_name(topology), "namespace": ha.namespace,
              "topology": topology.name, "max_message_length": ha.max_message_length,
              "channel": mq.channel, "sharecnv": mq.sharecnv,
              "image_log_length": ha.image_log_length,
              "queue_definitions": queue_definitions(topology),
              "ini_stanzas": ini_stanzas(topology)}
    return render_file(templates / CONFIGMAP_TEMPLATE, values)


def render_member(topology: TopologySpec, index: int, templates: Path = TEMPLATES
                  ) -> dict[str, Any]:
    """The QueueManager of member ``index`` (for provisioning and for a scale-out)."""
    _check(topology)
    if not 0 <= index < topology.members:
        raise ProvisionError(f"member {index} does not exist: topology {topology.name} has "
                             f"members 0 to {topology.members - 1}")
    mq, ha = mq_of(topology), native_ha_of(topology)
    values = {"name": object_name(topology, index), "namespace": ha.namespace,
              "topology": topology.name, "version": ha.version, "license": ha.license,
              "use": ha.use, "tls": ha.tls_secret is not None,
              "tls_secret": ha.tls_secret or "", "qm_name": mq.qm_name(index),
              "storage_class": ha.storage_class, "configmap": configmap_name(topology),
              "channel_mqsc": "disable-tls.mqsc" if ha.tls_secret else "disable.mqsc",
              "log_file_pages": ha.log_file_pages, "memory": ha.memory,
              "cpu": cpu_quantity(topology.cpu_per_member) if topology.cpu_per_member else ""}
    return render_file(templates / QUEUE_MANAGER_TEMPLATE, values)


def render(topology: TopologySpec, templates: Path = TEMPLATES) -> list[dict[str, Any]]:
    """Every object ``up()`` applies: the ConfigMap, then the QueueManagers of the ``start``
    members."""
    return [render_configmap(topology, templates)] + [
        render_member(topology, index, templates) for index in range(topology.start)]


def mq_of(topology: TopologySpec) -> MqSpec:
    if topology.broker != "ibmmq" or topology.ibmmq is None:
        raise ProvisionError(f"topology {topology.name} is not an IBM MQ topology (broker "
                             f"{topology.broker}); Native HA needs broker ibmmq")
    return topology.ibmmq


def native_ha_of(topology: TopologySpec) -> NativeHaSpec:
    mq = mq_of(topology)
    if topology.placement != "kubernetes" or mq.native_ha is None:
        raise ProvisionError(f"topology {topology.name} is not a Native HA topology: it needs "
                             f"placement kubernetes and an ibmmq.native_ha section (placement "
                             f"{topology.placement}, native_ha "
                             f"{'set' if mq.native_ha else 'missing'})")
    return mq.native_ha


def _check(topology: TopologySpec) -> None:
    """Every value that goes into a manifest, checked before it is substituted verbatim."""
    mq, ha = mq_of(topology), native_ha_of(topology)
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


