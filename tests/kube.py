"""What the Kubernetes tests share: whether a real cluster with an operator is at hand, and the
fakes the provisioner tests use in place of the API (no cluster, no ``kubernetes`` package)."""

from __future__ import annotations

import os
from pathlib import Path


def cluster_with_operator(crd: str, operator: str) -> str | None:
    """Why an apply test cannot run here (no kubeconfig, no client, no ``crd`` in the cluster),
    or None when it can."""
    path = os.environ.get("KUBECONFIG")
    if not path:
        return "KUBECONFIG is not set"
    if not all(Path(p).is_file() for p in path.split(os.pathsep) if p):
        return f"KUBECONFIG {path} is not a file"
    try:
        from kubernetes import client, config
    except ImportError:
        return "the kubernetes package (the k8s extra) is not installed"
    try:
        config.load_kube_config(config_file=path)
        client.ApiextensionsV1Api().read_custom_resource_definition(crd, _request_timeout=10)
    except Exception as error:  # any failure means: no usable cluster here
        if getattr(error, "status", None) == 404:
            return f"the cluster of {path} has no {crd} (the {operator} is not installed)"
        return f"the cluster of {path} cannot be asked for {crd}: {error}"
    return None


class FakeApiError(Exception):
    """Shaped like kubernetes.client.ApiException: status and reason."""

    def __init__(self, status: int, reason: str = ""):
        super().__init__(f"({status}) {reason}")
        self.status, self.reason = status, reason


class FakeClock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
