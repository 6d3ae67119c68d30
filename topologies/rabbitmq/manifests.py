"""A RabbitMQ topology as the cluster operator's ``RabbitmqCluster`` (rabbitmq.com/v1beta1),
rendered from ``k8s/rabbitmq/rabbitmqcluster.yaml``; :mod:`topologies.rabbitmq.kubernetes`
applies it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError
from orchestrator.specs.hosts import RabbitKubernetesSpec
from orchestrator.specs.topology import TopologySpec
from topologies.assets import asset
from topologies.templates import render_file

TEMPLATES = asset("k8s", "rabbitmq")
TEMPLATE = "rabbitmqcluster.yaml"
GROUP, VERSION, PLURAL = "rabbitmq.com", "v1beta1", "rabbitmqclusters"
AMQP_PORT, MANAGEMENT_PORT, PROMETHEUS_PORT = 5672, 15672, 15692
READY = "AllReplicasReady"
POLL_INTERVAL_S = 5.0
MAX_NAME = 45  # N-server must leave room for the StatefulSet's controller-revision-hash label
MAX_ADDITIONAL_CONFIG = 2000  # the CRD's maxLength of spec.rabbitmq.additionalConfig
WAL_DEFAULT_BYTES = 512 * 1024 ** 2

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_CONF_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "E": 1e18}


# -- rendering ----------------------------------------------------------------------------------

def kubernetes_of(topology: TopologySpec) -> RabbitKubernetesSpec:
    """The topology's ``kubernetes`` section; a ProvisionError if it is not a RabbitMQ
    topology with ``placement: kubernetes``."""
    if topology.broker != "rabbitmq" or topology.placement != "kubernetes" or \
            topology.kubernetes is None:
        raise ProvisionError(f"topology {topology.name} is not RabbitMQ on Kubernetes (broker "
                             f"{topology.broker}, placement {topology.placement}, kubernetes "
                             f"section {'set' if topology.kubernetes else 'missing'})")
    return topology.kubernetes


def cluster_name(topology: TopologySpec) -> str:
    """The RabbitmqCluster's name: the topology's, starting with a letter (it names the client
    Service, an RFC 1035 label)."""
    name = topology.name.strip("-")
    return name if name[:1].isalpha() else f"rmq-{name}"


def quantity_bytes(text: str) -> float:
    """A Kubernetes quantity (``2Gi``, ``500M``, ``1.5Gi``) as a number of bytes."""
    match = _QUANTITY.match(text)
    if not match:
        raise ProvisionError(f"{text!r} is not a Kubernetes quantity such as 2Gi")
    return float(match[1]) * _SUFFIX.get(match[2] or "", 1)


def cpu_quantity(cores: float) -> str:
    """Cores as a CPU quantity: ``2`` for 2.0, ``500m`` for 0.5."""
    return str(int(cores)) if float(cores).is_integer() else f"{round(cores * 1000)}m"


def config_defaults(spec: RabbitKubernetesSpec) -> dict[str, str]:
    """What surge adds to rabbitmq.conf before the topology's ``additional_config``:

    - ``collect_statistics_interval = 1000``: management statistics once a second (default 5 s),
      as the local provisioner sets it, so that the controller's 1 Hz samples see fresh
      connection and queue figures.
    - ``raft.wal_max_size_bytes``: at most a quarter of the memory RabbitMQ gets (the operator
      hands it the memory limit less 20%, at most 2 GiB less), never above the 512 MiB default.
      RabbitMQ's quorum queue guide: every quorum queue's messages sit in the WAL's memory table
      until it reaches this size, so a node should have at least 3 times, and for high
      throughput 4 times, the WAL limit in memory; the default 512 MiB needs a 2.5 GiB limit.

    The operator's own defaults already give quorum queues what they need otherwise
    (``cluster_partition_handling = pause_minority``)."""
    limit = quantity_bytes(spec.memory)
    available = limit - 2 * 2 ** 30 if limit / 5 > 2 * 2 ** 30 else limit - limit / 5
    wal = int(min(WAL_DEFAULT_BYTES, available // 4))
    return {"collect_statistics_interval": "1000", "raft.wal_max_size_bytes": str(wal)}


def additional_config(spec: RabbitKubernetesSpec) -> str:
    """``spec.rabbitmq.additionalConfig``: surge's defaults overridden key by key by the
    topology's ``additional_config``, one ``key = value`` line each."""
    merged = {**config_defaults(spec), **{k: str(v) for k, v in spec.additional_config.items()}}
    return "".join(f"{key} = {value}\n" for key, value in merged.items())


def render(topology: TopologySpec, replicas: int | None = None, plugins: Sequence[str] = (),
           templates: Path = TEMPLATES) -> dict[str, Any]:
    """The RabbitmqCluster of ``topology`` with ``replicas`` members (default ``start``) and
    ``plugins`` enabled beyond the operator's essential ones."""
    spec = kubernetes_of(topology)
    replicas = topology.start if replicas is None else replicas
    _check(topology, spec, replicas, plugins)
    values = {"name": cluster_name(topology), "namespace": spec.namespace,
              "topology": topology.name, "replicas": replicas, "image": spec.image or "",
              "cpu": cpu_quantity(topology.cpu_per_member) if topology.cpu_per_member else "",
              "memory": spec.memory, "storage": spec.storage,
              "storage_class": spec.storage_class or "", "plugins": list(plugins),
              "additional_config": additional_config(spec)}
    return render_file(templates / TEMPLATE, values)


def _check(topology: TopologySpec, spec: RabbitKubernetesSpec, replicas: int,
           plugins: Sequence[str]) -> None:
    """Every value that goes into the manifest, checked before it is rendered (the template
    quotes them; these are the operator's and Kubernetes' own rules)."""
    name, conf = cluster_name(topology), spec.additional_config
    keys_ok = all(_CONF_KEY.match(k) and "\n" not in str(v) and str(v).strip()
                  for k, v in conf.items())
    size = len(additional_config(spec)) if keys_ok and _QUANTITY.match(spec.memory) else 0
    problems = [what for ok, what in [
        (len(name) <= MAX_NAME, f"cluster name {name!r} is over {MAX_NAME} characters"),
        (_LABEL_VALUE.match(topology.name), f"name {topology.name!r} is not a label value"),
        (_DNS_LABEL.match(spec.namespace), f"namespace {spec.namespace!r} is not a namespace"),
        (_QUANTITY.match(spec.memory), f"memory {spec.memory!r} is not a quantity"),
        (_QUANTITY.match(spec.storage), f"storage {spec.storage!r} is not a quantity"),
        (_DNS_SUBDOMAIN.match(spec.storage_class or "x"),
         f"storage_class {spec.storage_class!r} is not a StorageClass name"),
        (_IMAGE.match(spec.image or "x"), f"image {spec.image!r} is not an image reference"),
        (0 <= replicas <= topology.members, f"replicas {replicas} is not in the pool"),
        (all(re.match(r"^\w{1,100}$", p) for p in plugins), f"{list(plugins)}: not plugins"),
        (keys_ok, "additional_config needs rabbitmq.conf keys and one-line values"),
        (size <= MAX_ADDITIONAL_CONFIG, f"rabbitmq.additionalConfig would be {size} characters; "
                                        f"the operator takes {MAX_ADDITIONAL_CONFIG}"),
    ] if not ok]
    if problems:
        raise ProvisionError(f"topology {topology.name} cannot be rendered as a RabbitmqCluster: "
                             + "; ".join(problems))


