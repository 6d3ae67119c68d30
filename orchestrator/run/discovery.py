"""Prometheus' file-based service discovery: a running run's scrape targets in a file.

Every run writes ``<state>/prometheus/<run id>.json`` (the state directory being surge's,
``$SURGE_STATE_DIR`` or ``~/.local/state/surge``) while its agents are up, and removes it when it
ends. The file is what ``file_sd_configs`` reads: the controller's ``/metrics`` and every agent's,
labelled with the run id, the scenario and the role (controller or agent). One scrape job covers
every run on the machine, however many and on whatever ports::

    scrape_configs:
      - job_name: surge
        scrape_interval: 1s
        file_sd_configs:
          - files: ["/home/me/.local/state/surge/prometheus/*.json"]

The run directory keeps a copy, ``prometheus.json``, which names that run's targets alone (to
point a Prometheus at one run) and stays as the record of what served which metrics.

The file is replaced atomically (written beside it under a name the pattern does not match, then
renamed), so Prometheus never reads half of one. While a run goes its controller holds a lock
beside the file (:func:`claim`); a file whose lock nobody holds was left by a controller that
died, and the next run removes it (:func:`sweep`), so Prometheus stops scraping dead targets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from results.rundir.jsonfile import replace_text
from results.rundir.locks import FileLock, is_held
from results.rundir.manifest import Prometheus
from topologies.base import Member

SD_DIR_NAME = "prometheus"
SD_RUN_FILE = "prometheus.json"  # the run directory's copy


def target(host: str, port: int) -> str:
    """``host:port`` as Prometheus writes a target (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def targets_document(controller: str, agents: Sequence[str], run_id: str,
                     scenario: str, brokers: Mapping[str, str] | None = None) -> list[dict]:
    """The ``file_sd_configs`` document of one run: a target group for the controller's
    ``/metrics`` (``controller``, ``host:port``), one for the agents' (``agents``, each
    ``host:port``; no group when there are none) and one per broker member's own Prometheus
    endpoint (``brokers``, member name -> ``host:port``, labelled ``member`` too), labelled
    ``run_id``, ``scenario`` and ``role`` (``controller``, ``agent`` or ``broker``)."""
    def group(addresses: Sequence[str], role: str, **extra: str) -> dict:
        return {"targets": list(addresses),
                "labels": {"run_id": run_id, "scenario": scenario, "role": role, **extra}}
    groups = [group([controller], "controller")]
    if agents:
        groups.append(group(agents, "agent"))
    groups.extend(group([address], "broker", member=name)
                  for name, address in (brokers or {}).items())
    return groups


def default_sd_dir() -> Path:
    """``<state root>/prometheus``: the one directory every run on this machine writes its
    targets file into, so one ``file_sd_configs`` pattern finds them all."""
    from topologies.base import default_state_root
    return default_state_root() / SD_DIR_NAME


def scrape_config(directory: Path, interval_s: float = 1.0) -> str:
    """A ``prometheus.yml`` with one job scraping every run whose targets file is in
    ``directory``. Prometheus watches the directory for new files once it exists (and looks
    again every 5 s besides), so a Prometheus started before the first run misses none."""
    pattern = json.dumps(str(directory / "*.json"))
    return (f"# prometheus.yml: one job for every surge run on this machine\n"
            f"scrape_configs:\n"
            f"  - job_name: surge\n"
            f"    scrape_interval: {interval_s:g}s\n"
            f"    honor_labels: true\n"
            f"    file_sd_configs:\n"
            f"      - files: [{pattern}]\n"
            f"        refresh_interval: 5s\n")


def sd_file(directory: Path, run_id: str) -> Path:
    """Where the targets file of run ``run_id`` goes in ``directory``."""
    return directory / f"{run_id}.json"


def write_service_discovery(directory: Path, run_id: str, scenario: str, controller: str,
                            agents: Sequence[str], brokers: Mapping[str, str] | None = None,
                            path: Path | None = None) -> Path:
    """Write (or replace, atomically) the targets file of run ``run_id`` in ``directory``, or
    at ``path`` (see :func:`targets_document`); returns its path."""
    path = path or sd_file(directory, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(targets_document(controller, agents, run_id, scenario,
                                                   brokers), indent=2) + "\n")
    return path


def remove_service_discovery(directory: Path, run_id: str) -> None:
    """Remove the targets file of run ``run_id`` (its processes are gone); no error if there is
    none."""
    sd_file(directory, run_id).unlink(missing_ok=True)


def _lock(directory: Path, run_id: str) -> Path:
    return directory / f".{run_id}.lock"


def claim(directory: Path, run_id: str) -> FileLock:
    """Hold run ``run_id``'s place in ``directory`` while it goes (released by its end, or by
    the kernel when its process dies)."""
    lock, _ = FileLock.take(_lock(directory, run_id), {"kind": "run", "id": run_id})
    assert lock is not None, f"run {run_id} is claimed twice"
    return lock


def sweep(directory: Path) -> list[str]:
    """Remove the targets files that no live controller holds; the run ids removed."""
    removed = []
    for path in sorted(directory.glob("*.json")):
        if not is_held(_lock(directory, path.stem)):
            path.unlink(missing_ok=True)
            _lock(directory, path.stem).unlink(missing_ok=True)
            removed.append(path.stem)
    return removed


def announce(directory: Path, run_id: str, scenario: str, controller: str,
             agents: Sequence[Any], members: Sequence[Member], run_dir: Path) -> Prometheus:
    """List the controller's (``controller``, ``host:port``), the agents' and the members'
    /metrics for Prometheus while the run goes (in ``directory``, removed at its end by
    :func:`remove_service_discovery`) and in the run directory; what run.json records."""
    targets = [target(a.host, a.port) for a in agents if getattr(a, "port", None)]
    brokers = {m.name: target(m.host, m.prometheus_port) for m in members
               if m.prometheus_port}

    def write(where: Path | None) -> Path:
        return write_service_discovery(directory, run_id, scenario, controller, targets,
                                       brokers, where)
    write(run_dir / SD_RUN_FILE)  # the run directory's record
    path = write(None)  # the machine's directory of live runs
    return Prometheus(controller=controller, agents=targets, sd_file=str(path))
