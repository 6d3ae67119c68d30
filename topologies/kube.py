"""Reaching a Kubernetes cluster with the official client (the ``k8s`` extra), imported only
when something talks to a cluster: API calls, pod state, and port-forwards from loopback to a
pod (:class:`PortForwarder`, one forward stream per accepted connection, as ``kubectl
port-forward`` does)."""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError

log = logging.getLogger(__name__)

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


FATAL_WAITING = {"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerError", "CreateContainerConfigError"}
STREAM_LOCK = threading.Lock()


# -- the cluster ------------------------------------------------------------------------------

def stream_core(client: Any) -> Any:
    """A CoreV1Api on its own ApiClient, for port-forward and exec streams only: the client's
    ``stream``/``portforward`` swap the ApiClient's transport while they open a stream, which
    must not catch an ordinary call made at the same time on another thread."""
    return client.CoreV1Api(client.ApiClient())


def open_portforward(core: Any, pod: str, namespace: str, port: int) -> Any:
    """One port-forward stream to ``port`` of ``pod`` (a ``kubernetes`` ``PortForward``)."""
    from kubernetes.stream import portforward
    with STREAM_LOCK:
        return portforward(core.connect_get_namespaced_pod_portforward, pod, namespace,
                           ports=str(port))


def dig(obj: Any, *path: str) -> Any:
    """``obj.a.b`` for the client's model objects, ``obj['a']['b']`` for dicts; None if absent."""
    for name in path:
        if obj is None:
            return None
        obj = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return obj


def pod_ready(pod: Any) -> bool:
    """Whether the pod's Ready condition is True."""
    return any(dig(c, "type") == "Ready" and dig(c, "status") == "True"
               for c in dig(pod, "status", "conditions") or [])


def pod_trouble(pod: Any) -> str | None:
    """Why ``pod`` will not become Ready by itself (failed, or an image that cannot be pulled),
    or None."""
    if dig(pod, "status", "phase") in ("Failed", "Succeeded"):
        return f"phase {dig(pod, 'status', 'phase')} ({dig(pod, 'status', 'reason') or ''})"
    for status in dig(pod, "status", "container_statuses") or []:
        waiting = dig(status, "state", "waiting")
        if waiting is not None and dig(waiting, "reason") in FATAL_WAITING:
            return f"{dig(waiting, 'reason')}: {dig(waiting, 'message') or ''}".strip(": ")
    return None


# -- the port-forward ---------------------------------------------------------------------------

class PortForwarder:
    """A loopback port carried to a pod's port: every connection accepted on ``127.0.0.1:port``
    gets its own stream from ``connect()`` (a ``kubernetes`` ``PortForward``), and a thread
    copies bytes both ways until either side closes."""

    def __init__(self, connect: Callable[[], Any], remote_port: int, label: str):
        self._connect, self.remote_port, self.label = connect, remote_port, label
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)  # so that close() is seen without waking accept()
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name=f"port-forward {label}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), daemon=True,
                             name=f"port-forward {self.label} conn").start()

    def _carry(self, conn: socket.socket) -> None:
        try:
            remote = self._connect().socket(self.remote_port)
        except Exception as error:  # the API server refused: the client sees a closed socket
            log.warning("port-forward to %s:%d failed: %s", self.label, self.remote_port, error)
            conn.close()
            return
        try:
            relay(conn, remote, self._closed)
        finally:
            conn.close()
            remote.close()  # ends the stream: the client's proxy thread closes the WebSocket

    def close(self) -> None:
        """Stop accepting; connections being carried end with their next read."""
        self._closed.set()
        self._listener.close()


def relay(a: Any, b: Any, stop: threading.Event) -> None:
    """Copy bytes between two sockets until one of them closes (or ``stop`` is set)."""
    while not stop.is_set():
        readable, _, _ = select.select([a, b], [], [], 1.0)
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            (b if source is a else a).sendall(data)


# -- rendering -----------------------------------------------------------------------------------


def exec_in_pod(core: Any, pod: str, namespace: str, container: str, argv: list[str]) -> str:
    """Run ``argv`` in a pod's container (``kubectl exec``) and return its output."""
    from kubernetes.stream import stream
    with STREAM_LOCK:
        return stream(core.connect_get_namespaced_pod_exec, pod, namespace, command=argv,
                      container=container, stderr=True, stdin=False, stdout=True, tty=False)
