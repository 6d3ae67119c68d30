"""One RabbitMQ node as a local process: its files, its environment, and rabbitmqctl calls."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ProvisionError
from topologies.base import Member
from topologies.cgroups import CpuCgroup, joining

RABBITMQ_BIN = Path(os.environ.get("SURGE_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
PLUGINS = "[rabbitmq_management,rabbitmq_prometheus]."


def amqp_url(host: str, port: int, tls: bool = False) -> str:
    """The endpoint clients of a member connect to, without credentials (those travel in the
    driver's settings): ``amqp://HOST:PORT``, ``amqps://`` with ``tls``."""
    name = f"[{host}]" if ":" in host else host
    return f"{'amqps' if tls else 'amqp'}://{name}:{port}"


@dataclass(frozen=True)
class NodeFiles:
    """Where one member keeps its data, logs and configuration."""

    root: Path

    @property
    def mnesia(self) -> Path:
        """Data directory base (RABBITMQ_MNESIA_BASE)."""
        return self.root / "mnesia"

    @property
    def logs(self) -> Path:
        """Log directory (RABBITMQ_LOG_BASE)."""
        return self.root / "log"

    @property
    def console_log(self) -> Path:
        """The node's stdout and stderr."""
        return self.root / "console.log"


def write_files(member: Member, files: NodeFiles, seeds: list[str]) -> None:
    """Write the node's configuration and enabled-plugins files; a blank node joins ``seeds``."""
    for directory in (files.mnesia, files.logs):
        directory.mkdir(parents=True, exist_ok=True)
    (files.root / "enabled_plugins").write_text(PLUGINS + "\n")
    (files.root / "rabbitmq.conf").write_text(config_text(member, seeds))


def config_text(member: Member, seeds: list[str]) -> str:
    """The node's rabbitmq.conf: listeners on the member's address and ports, statistics once
    a second, and classic peer discovery of ``seeds`` for a blank node."""
    return "\n".join([
        f"listeners.tcp.1 = {member.host}:{member.port}",
        f"management.tcp.ip = {member.host}",
        f"management.tcp.port = {member.management_port}",
        f"prometheus.tcp.ip = {member.host}",
        f"prometheus.tcp.port = {member.prometheus_port}",
        "loopback_users = none",
        "collect_statistics_interval = 1000",
        "log.console = false",
        "log.file.level = warning",
        *(["cluster_formation.peer_discovery_backend = classic_config",
           "cluster_formation.randomized_startup_delay_range.min = 0",
           "cluster_formation.randomized_startup_delay_range.max = 0"] if seeds else []),
        *[f"cluster_formation.classic_config.nodes.{i} = {seed}"
          for i, seed in enumerate(seeds, start=1)],
        "",
    ])


def node_env(member: Member, files: NodeFiles, dist_port: int, epmd_port: int) -> dict[str, str]:
    """Environment for ``rabbitmq-server`` so several nodes run side by side."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")}
    env.update({
        "RABBITMQ_NODENAME": member.name,
        "RABBITMQ_NODE_PORT": str(member.port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(files.mnesia),
        "RABBITMQ_LOG_BASE": str(files.logs),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(files.root / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(files.root / "rabbitmq"),
        "RABBITMQ_PID_FILE": str(files.root / "node.pid"),
        "ERL_EPMD_PORT": str(epmd_port),
        # Makes the start script exec the VM, so the PID we hold is the broker's own.
        "RUNNING_UNDER_SYSTEMD": "1",
    })
    env.setdefault("HOME", "/root")
    return env


def spawn(env: dict[str, str], files: NodeFiles, cgroup: CpuCgroup | None) -> subprocess.Popen:
    """Start the node in its own session (and cgroup, if any); returns at once."""
    log = open(files.console_log, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        return subprocess.Popen(
            [str(RABBITMQ_BIN / "rabbitmq-server")], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=joining(cgroup))
    except OSError as error:
        raise ProvisionError(f"cannot start {RABBITMQ_BIN / 'rabbitmq-server'}: {error}") \
            from None
    finally:
        log.close()


def rabbitmqctl(node: str, epmd_port: int, *args: str, timeout_s: float = 120.0,
                cgroup: CpuCgroup | None = None) -> str:
    """Run ``rabbitmqctl -n node ARGS`` (in ``cgroup``, if given: the CLI
    is an Erlang VM of its own, slow to start on a busy host at a normal CPU weight); raises
    ``ProvisionError`` with its output on failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")}
    env["ERL_EPMD_PORT"] = str(epmd_port)
    env.setdefault("HOME", "/root")
    command = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", node, *args]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL,
                              preexec_fn=joining(cgroup))
    except subprocess.TimeoutExpired:
        raise ProvisionError(f"rabbitmqctl {' '.join(args)} on {node} timed out after "
                             f"{timeout_s:.0f} s", temporary=True) from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip().splitlines()
        raise ProvisionError(f"rabbitmqctl {' '.join(args)} on {node} failed: "
                             f"{' '.join(output[-3:])}", temporary=True)
    return done.stdout


LIST_QUEUES = ("list_queues", "-q", "--no-table-headers", "name", "messages")


def parse_queue_listing(listing: str) -> dict[str, int]:
    """``rabbitmqctl list_queues`` output (``LIST_QUEUES``) as messages per queue."""
    depths = {}
    for line in listing.splitlines():
        name, _, count = line.rpartition("\t")
        if name and count.strip().isdigit():
            depths[name] = int(count)
    return depths
