"""One RabbitMQ node as a local process: its files, its environment, and rabbitmqctl calls."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ProvisionError
from topologies.base import Member
from topologies.cgroups import CpuCgroup, joining
from topologies.rabbitmq.credentials import ClusterSecrets

RABBITMQ_BIN = Path(os.environ.get("SURGE_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
PLUGINS = "[rabbitmq_management,rabbitmq_prometheus]."
#: The same, for the members of linked clusters (:mod:`topologies.rabbitmq.linked`).
SHOVEL_PLUGINS = ("[rabbitmq_management,rabbitmq_prometheus,rabbitmq_shovel,"
                  "rabbitmq_shovel_management].")
#: Where a local topology's epmd and Erlang distribution listen.
LOOPBACK = "127.0.0.1"


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


def write_files(member: Member, files: NodeFiles, seeds: list[str],
                secrets: ClusterSecrets, plugins: str = PLUGINS) -> None:
    """Write the node's configuration and enabled-plugins files; a blank node joins ``seeds``.
    The configuration holds the cluster's password: the node's directory is 0700, the file
    0600."""
    files.root.mkdir(parents=True, exist_ok=True)
    os.chmod(files.root, 0o700)
    for directory in (files.mnesia, files.logs):
        directory.mkdir(parents=True, exist_ok=True)
    (files.root / "enabled_plugins").write_text(plugins + "\n")
    config = files.root / "rabbitmq.conf"
    config.unlink(missing_ok=True)
    descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(config_text(member, seeds, secrets))


def config_text(member: Member, seeds: list[str], secrets: ClusterSecrets) -> str:
    """The node's rabbitmq.conf: listeners on the member's address and ports, the cluster's
    user instead of guest (created when the cluster's first node boots; guest is not),
    statistics once a second, and classic peer discovery of ``seeds`` for a blank node."""
    return "\n".join([
        f"listeners.tcp.1 = {member.host}:{member.port}",
        f"management.tcp.ip = {member.host}",
        f"management.tcp.port = {member.management_port}",
        f"prometheus.tcp.ip = {member.host}",
        f"prometheus.tcp.port = {member.prometheus_port}",
        f"default_user = {secrets.user}",
        f"default_pass = {secrets.password}",
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


def dist_args(address: str | None) -> str:
    """Erlang arguments that bind a VM's distribution listener to ``address`` (an IPv4
    literal; ``None``: every address, Erlang's default): ``-kernel inet_dist_use_interface
    {127,0,0,1}``, the same for a node (``RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS``) and for the
    CLI's own VM (``RABBITMQ_CTL_ERL_ARGS``)."""
    if address is None:
        return ""
    octets = address.split(".")
    if len(octets) != 4 or not all(o.isdigit() and int(o) < 256 for o in octets):
        raise ProvisionError(f"cannot bind Erlang distribution to {address!r}: "
                             "not an IPv4 address")
    return f"-kernel inet_dist_use_interface {{{','.join(str(int(o)) for o in octets)}}}"


def node_env(member: Member, files: NodeFiles, dist_port: int, epmd_port: int, home: Path,
             dist_address: str | None = LOOPBACK) -> dict[str, str]:
    """Environment for ``rabbitmq-server`` so several nodes run side by side: the topology's
    ``home`` (where its own Erlang cookie is) and its distribution on ``dist_address``."""
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
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": dist_args(dist_address),
        "ERL_EPMD_PORT": str(epmd_port),
        "HOME": str(home),
        # Makes the start script exec the VM, so the PID we hold is the broker's own.
        "RUNNING_UNDER_SYSTEMD": "1",
    })
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


def rabbitmqctl(node: str, epmd_port: int, home: Path, *args: str, timeout_s: float = 120.0,
                cgroup: CpuCgroup | None = None) -> str:
    """Run ``rabbitmqctl -n node ARGS`` with the topology's ``home`` (its Erlang cookie) and
    the CLI's own distribution listener on loopback (in ``cgroup``, if given: the CLI
    is an Erlang VM of its own, slow to start on a busy host at a normal CPU weight); raises
    ``ProvisionError`` with its output on failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")}
    env.update({"ERL_EPMD_PORT": str(epmd_port), "HOME": str(home),
                "RABBITMQ_CTL_ERL_ARGS": dist_args(LOOPBACK)})
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
