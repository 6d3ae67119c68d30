"""Facts about the controller's own host: its CPU now, and what a run records about it."""

from __future__ import annotations

import os
import platform
import socket
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import psutil

from topologies.base import CpuReading


def host_cpu() -> CpuReading:
    """This host's busy and total CPU seconds over all cores, now."""
    times = psutil.cpu_times()
    total = sum(times)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return CpuReading(total - idle, time.monotonic(), total)


def host_facts() -> dict[str, Any]:
    """The host a run was driven from (``run.json`` ``host``)."""
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total, "kernel": platform.release(),
            "python": platform.python_version()}


def versions() -> dict[str, str]:
    """Versions of surge and the libraries whose behaviour shapes the figures."""
    out = {}
    for name in ("surge", "pika", "pyarrow", "pydantic"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    return out
