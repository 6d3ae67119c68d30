"""Reaching a Kubernetes cluster with the official client (the ``k8s`` extra), imported only
when something talks to a cluster."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError


def load_kubernetes() -> Any:
    """The ``kubernetes.client`` module, configured from ``$KUBECONFIG`` (or ``~/.kube/config``)
    or, inside a pod, from its service account."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise ProvisionError("talking to Kubernetes needs the kubernetes package: pip install "
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
    except (config.ConfigException, OSError, ValueError) as error:
        raise ProvisionError(f"cannot load the Kubernetes configuration from "
                             f"{kubeconfig or default}: {error}") from None
    return client
