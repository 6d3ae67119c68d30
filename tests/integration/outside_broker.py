"""A RabbitMQ node started the way a platform team would, not by surge: its own user and
password (no guest), a TLS listener with certificates from a certificate authority made here,
management and Prometheus listeners, and its own cookie and epmd, all on loopback."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")


@dataclass(frozen=True)
class OutsideBroker:
    """Where the node listens and what a client needs to reach it."""

    root: Path
    amqp_port: int
    tls_port: int
    management_port: int
    prometheus_port: int
    user: str
    password: str
    ca_file: Path
    pid: int

    @property
    def node(self) -> str:
        """The node's Erlang name."""
        return f"outside-{self.tls_port}@localhost"


def make_certificates(directory: Path, name: str = "localhost") -> dict[str, Path]:
    """A CA, and a server certificate it signed for ``name`` and 127.0.0.1 (PEM files)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "san.ext"
    ext.write_text(f"subjectAltName=DNS:{name},IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out",
            str(ca), "-days", "2", "-subj", f"/CN=surge test CA {directory.name}")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", f"/CN={name}")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
    for path in (ca_key, key):
        path.chmod(0o600)
    return {"ca": ca, "cert": cert, "key": key}


def make_client_certificate(ca_file: Path, user: str) -> dict[str, Path]:
    """A client certificate for ``user`` (its common name), signed by the CA of
    :func:`make_certificates` whose certificate is ``ca_file`` (its key beside it)."""
    directory = ca_file.parent
    key, csr, cert = (directory / f"{user}.{suffix}" for suffix in ("key", "csr", "pem"))
    for args in (["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
                  "-subj", f"/CN={user}"],
                 ["x509", "-req", "-in", str(csr), "-CA", str(ca_file), "-CAkey",
                  str(directory / "ca.key"), "-CAcreateserial", "-out", str(cert), "-days",
                  "2"]):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    key.chmod(0o600)
    return {"cert": cert, "key": key}


@contextlib.contextmanager
def outside_broker(root: Path, port_base: int, user: str = "perf-user",
                   sasl_external: bool = False):
    """Run the node for the duration; it is stopped by PID (its process group) afterwards.
    ``sasl_external``: its TLS listener asks for client certificates and takes SASL EXTERNAL
    (the certificate's common name is the user)."""
    certs = make_certificates(root / "certs")
    password = secrets.token_urlsafe(18)
    ports = {k: port_base + i for i, k in enumerate(
        ("amqp", "tls", "management", "prometheus", "dist", "epmd"))}
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    cookie = home / ".erlang.cookie"
    cookie.write_text(secrets.token_hex(20))
    cookie.chmod(0o400)
    plugins = ["rabbitmq_management", "rabbitmq_prometheus"] + \
        (["rabbitmq_auth_mechanism_ssl"] if sasl_external else [])
    (root / "enabled_plugins").write_text(f"[{','.join(plugins)}].\n")
    external = ["auth_mechanisms.1 = EXTERNAL", "auth_mechanisms.2 = PLAIN",
                "ssl_cert_login_from = common_name"] if sasl_external else []
    (root / "rabbitmq.conf").write_text("\n".join([
        f"listeners.tcp.1 = 127.0.0.1:{ports['amqp']}",
        f"listeners.ssl.1 = 127.0.0.1:{ports['tls']}",
        f"ssl_options.cacertfile = {certs['ca']}",
        f"ssl_options.certfile = {certs['cert']}",
        f"ssl_options.keyfile = {certs['key']}",
        f"ssl_options.verify = {'verify_peer' if sasl_external else 'verify_none'}",
        *external,
        "ssl_options.fail_if_no_peer_cert = false",
        "management.tcp.ip = 127.0.0.1",
        f"management.tcp.port = {ports['management']}",
        "prometheus.tcp.ip = 127.0.0.1",
        f"prometheus.tcp.port = {ports['prometheus']}",
        f"default_user = {user}",
        f"default_pass = {password}",
        "collect_statistics_interval = 1000",
        "log.console = false",
        "log.file.level = warning",
        ""]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "SURGE_"))}
    env.update({
        "HOME": str(home), "RABBITMQ_NODENAME": f"outside-{ports['tls']}@localhost",
        "RABBITMQ_NODE_PORT": str(ports["amqp"]), "RABBITMQ_DIST_PORT": str(ports["dist"]),
        "RABBITMQ_MNESIA_BASE": str(root / "mnesia"), "RABBITMQ_LOG_BASE": str(root / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"), "ERL_EPMD_PORT": str(ports["epmd"]),
        "ERL_EPMD_ADDRESS": "127.0.0.1", "RUNNING_UNDER_SYSTEMD": "1",
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}"})
    # Its own epmd, started here and stopped with the node (one the node started itself would
    # detach and outlive the test).
    epmd = subprocess.Popen(["epmd", "-port", str(ports["epmd"]), "-address", "127.0.0.1"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # listening before the node looks for it
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", ports["epmd"]), timeout=1):
            break
        time.sleep(0.05)
    with open(root / "console.log", "ab") as log:
        process = subprocess.Popen([str(RABBIT_BIN / "rabbitmq-server")], env=env,
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    broker = OutsideBroker(root, ports["amqp"], ports["tls"], ports["management"],
                           ports["prometheus"], user, password, certs["ca"], process.pid)
    try:
        _await(broker, process)
        yield broker
    finally:
        _stop(process)
        _stop(epmd)


def _await(broker: OutsideBroker, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{broker.prometheus_port}/metrics"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the outside broker exited: see {broker.root / 'console.log'}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"the outside broker did not start in {timeout_s:.0f} s")


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    for child in psutil.process_iter(["pid"]):  # epmd and erl_child_setup of its group
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if os.getpgid(child.pid) == process.pid:
                child.kill()
