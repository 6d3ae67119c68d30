"""The controller's ``/metrics`` port: its default, and the check of one asked for, in a module
of their own so that the command line's help can name it, and a run check it, without loading
the run machinery."""

from __future__ import annotations

import errno
import socket

from orchestrator.errors import SurgeError

LOOPBACK = "127.0.0.1"

#: The controller's ``/metrics`` port unless ``--metrics-port`` says otherwise. Prometheus'
#: registry of exporter ports fills 9100-9999, so any port there is some exporter's; this one is
#: outside it, outside surge's own brokers' ports (port_base 5680 and +10000, +10100, +20000,
#: +30000 from it; MQ 1414 and its exporters from 9157), RabbitMQ's (4369, 5672, 15672, 15692,
#: 25672), Spark's (4040, 7077, 8080) and Prometheus' own (9090-9094), and below Linux' ephemeral
#: range (32768-60999), so the kernel never hands it to some client as a random local port.
DEFAULT_METRICS_PORT = 19420


class MetricsPortError(SurgeError):
    """The ``/metrics`` port asked for is taken (or cannot be bound)."""

    exit_code = 2


def check_metrics_port(port: int | None, address: str = LOOPBACK) -> None:
    """Raise :class:`MetricsPortError` if ``port`` was asked for explicitly (not None, not 0)
    and cannot be bound on ``address`` now: for the command line to call before anything
    starts. (The port is let go again; the run's
    :class:`~orchestrator.run.exposition.ControllerMetrics` binds it for real.)"""
    if not port:
        return
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            probe.bind((address, port))
    except OSError as error:
        raise port_error(port, address, error) from None


def port_error(port: int, address: str, error: OSError) -> MetricsPortError:
    """Why ``port`` cannot serve ``/metrics`` on ``address``, in one line."""
    why = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
    return MetricsPortError(f"--metrics-port {port}: {address}:{port} {why}; choose another port, "
                            f"or 0 for any free one")
