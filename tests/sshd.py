"""A real OpenSSH sshd on 127.0.0.1, started by a test and stopped by PID.

``running_sshd(directory)`` generates a host key and an authorised client key into
``directory``, starts ``/usr/sbin/sshd -D -e`` on a free loopback port as a child process, and
yields an :class:`Sshd` describing how to reach it. On the way out it stops sshd by its PID,
waits for it, and fails if any process sshd started (a connection's sshd, a command -- found
as a descendant or by the ``SURGE_TEST_SSHD`` token sshd puts in every session's environment)
is still there; those are killed by PID first, so nothing outlives the test either way.

Nothing system-wide is touched except ``/run/sshd`` (sshd's privilege-separation directory),
which is created if missing. sshd runs as the current user (root in CI).
"""

from __future__ import annotations

import getpass
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.xdist_worker import worker_share

SSHD = "/usr/sbin/sshd"
ENV = "SURGE_TEST_SSHD"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"


def missing() -> str | None:
    """Why an sshd cannot be started here, or None."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is not installed (Debian's openssh-server; `make deps` installs it)"
    if not os.path.exists(SSH_KEYGEN):
        return "ssh-keygen is not installed (Debian's openssh-client)"
    return None


@dataclass(frozen=True)
class Sshd:
    """A running test sshd and what a client needs to reach it."""

    host: str
    port: int
    user: str
    key_file: Path          # private key authorised to log in as ``user``
    known_hosts_file: Path  # holds the server's host key for ``[host]:port``
    host_key_line: str      # that line
    pid: int
    log_file: Path
    token: str              # sshd puts SURGE_TEST_SSHD=<token> into every session's environment

    def descendants(self) -> list[psutil.Process]:
        """Every live process under sshd (connections and what they run)."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [p for p in children if _alive(p)]

    def session_processes(self) -> list[psutil.Process]:
        """Every live process a session of this sshd started, even one that outlived its
        connection and was reparented away from sshd (found by its environment)."""
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get(ENV) == self.token and _alive(process):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    def processes(self) -> list[psutil.Process]:
        """:meth:`descendants` and :meth:`session_processes` together."""
        unique = {p.pid: p for p in self.descendants() + self.session_processes()}
        return list(unique.values())


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


QUIET_PORTS = range(5000, 5300)  # below the kernel's ephemeral range, which bind(0) draws from
_handed: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now and this process has not
    handed out before. It comes from this worker's share of :data:`QUIET_PORTS`: a port the
    kernel gives for ``bind(0)`` (as every local agent's is) could be taken by another worker's
    agent between this call and the listen of whoever asked for it."""
    share = worker_share(QUIET_PORTS)
    for port in share:
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free port in {share.start}-{share.stop - 1}")


def keygen(path: Path) -> None:
    """Generate an unencrypted ed25519 key pair at ``path`` and ``path.pub``."""
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "surge-test",
                    "-f", str(path)], check=True, capture_output=True, timeout=30)


@contextmanager
def running_sshd(directory: Path, start_timeout_s: float = 10.0,
                 address: str = "127.0.0.1", also: tuple[str, ...] = ()) -> Iterator[Sshd]:
    """Start sshd on a free port of a loopback ``address`` (127.0.0.1, or e.g. 127.0.1.2 to
    stand for another host), and on the same port of the loopback addresses ``also`` (more
    hosts behind one server), with keys in ``directory``; stop it afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    host_key, client_key = directory / "host_ed25519", directory / "client_ed25519"
    keygen(host_key)
    keygen(client_key)
    authorized = directory / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    port = free_port()
    key_type, key_data = host_key.with_suffix(".pub").read_text().split()[:2]
    host_key_line = f"[{address}]:{port} {key_type} {key_data}"
    known_hosts = directory / "known_hosts"
    known_hosts.write_text("".join(f"[{host}]:{port} {key_type} {key_data}\n"
                                   for host in (address, *also)))
    config = directory / "sshd_config"
    token = secrets.token_hex(8)
    listen = "".join(f"ListenAddress {host}\n" for host in (address, *also))
    config.write_text(f"""\
Port {port}
{listen}HostKey {host_key}
PidFile {directory / "sshd.pid"}
AuthorizedKeysFile {authorized}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
PrintLastLog no
Subsystem sftp internal-sftp
SetEnv {ENV}={token}
LogLevel VERBOSE
""")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log_file = directory / "sshd.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT)
    server = Sshd(address, port, getpass.getuser(), client_key, known_hosts, host_key_line,
                  process.pid, log_file, token)
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sshd exited with {process.returncode}:\n"
                                   f"{log_file.read_text(errors='replace')}")
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd not listening on {port} after "
                                       f"{start_timeout_s} s:\n{log_file.read_text()}") from None
                time.sleep(0.05)
        yield server
    finally:
        seen.update((p.pid, p) for p in server.processes())
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        # A connection's sshd ends when its client disconnects; give it a moment.
        deadline = time.monotonic() + 5
        seen.update((p.pid, p) for p in server.session_processes())
        left = [p for p in seen.values() if _alive(p)]
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [p for p in left if _alive(p)]
        described = [f"{p.pid} {' '.join(_cmdline(p))}" for p in left]
        for p in left:
            with suppress(psutil.NoSuchProcess):
                p.kill()
        if left:
            raise AssertionError(f"processes started by the test sshd were left: {described}")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return ["?"]
