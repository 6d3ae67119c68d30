"""Reaching a Kubernetes cluster with the official client (the ``k8s`` extra), imported only
when something talks to a cluster."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError

EXISTS, MISSING = object(), object()  # what api_call returns for an expected 409 / 404


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


def api_status(error: BaseException) -> int | None:
    """The HTTP status of a kubernetes ``ApiException`` (None for anything else)."""
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def api_call(method: Callable[..., Any], *args: Any, exists_ok: bool = False,
             missing_ok: bool = False, hint404: str = "", **kwargs: Any) -> Any:
    """Call the API; 409 and 404 become ``EXISTS``/``MISSING`` where expected, every other API
    error a ProvisionError naming the call (temporary for 429 and 5xx)."""
    try:
        return method(*args, **{k: v for k, v in kwargs.items() if v is not None})
    except Exception as error:
        status = api_status(error)
        if status is None:
            raise
        if status == 409 and exists_ok:
            return EXISTS
        if status == 404 and missing_ok:
            return MISSING
        hint = {401: "the kubeconfig's credentials were refused",
                403: "the kubeconfig's user may not do this in the namespace",
                404: hint404}.get(status, "")
        raise ProvisionError(f"Kubernetes API {getattr(method, '__name__', method)} failed: "
                             f"{status} {getattr(error, 'reason', '') or ''}".rstrip()
                             + (f" ({hint})" if hint else ""),
                             temporary=status >= 500 or status in (0, 429)) from None
