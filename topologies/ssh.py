"""Run commands on remote hosts and move files to and from them over SSH (paramiko).

This is the generic layer under the SSH provisioners (IBM MQ queue managers, RabbitMQ nodes,
remote load agents). One :class:`SshSession` is one SSH connection to one host, described by an
:class:`~orchestrator.specs.mq.SshSpec`::

    with SshSession("QMHost1", spec, record=results.append) as ssh:
        ssh.upload(ini_text, "/nfs1/uniclus.ini")
        ssh.run("crtmqm -ii /nfs1/uniclus.ini UC01QM01", on_output=print_line)

What it guarantees:

- **Every command is recorded.** Each :meth:`SshSession.run` ends in one :class:`CommandResult`
  (host, command, exit status, stdout, stderr, duration) passed to ``record`` -- successes,
  failures and timeouts alike -- so a provisioner can keep every remote command's output in the
  run directory.
- **Failures say what happened.** A non-zero exit raises :class:`RemoteCommandError` naming the
  host, the command, the status and the last lines of stderr; a command past its time limit
  raises :class:`SshTimeout`; a host that cannot be reached raises :class:`SshConnectError`
  naming ``user@host:port`` and the reason (authentication failed, host key unknown, refused,
  timed out), after the configured retries, and a retry never hides the final reason.
- **Nothing is left running.** A timed-out command's whole process group is terminated on the
  host (SIGTERM, then SIGKILL after 2 s) before its channel is closed. This relies on OpenSSH's
  sshd starting each command in a new session, so the command's shell is its process group
  leader. A command that moves its children to another process group (``setsid``, ``set -m``)
  or runs them as another user (``sudo``) is responsible for them itself.

Remote commands are interpreted by the login shell of ``spec.user``, which must be a POSIX
shell (sh, bash, ksh, zsh): :meth:`SshSession.run` prefixes the command with a line that
reports the shell's process id on stderr (removed again from the output).

Host keys (``spec.known_hosts``):

- ``strict`` (the default): the host key must already be in ``known_hosts_file`` (default
  ``~/.ssh/known_hosts``); an unknown key fails with the key's fingerprint in the message.
- ``accept-new``: unknown keys are accepted and appended to that file; a *changed* key still
  fails.
- ``ignore``: any key is accepted and nothing is saved. For throw-away test hosts only: it
  gives no protection against a man in the middle.

Authentication: ``spec.key_file`` if given (and nothing else), otherwise the SSH agent and the
default keys in ``~/.ssh``.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import logging
import os
import posixpath
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import paramiko

from orchestrator.errors import SurgeError
from orchestrator.specs.hosts import SshSpec
from topologies.base import CommandResult

log = logging.getLogger(__name__)

#: Seconds to wait before each connection retry (the last value repeats).
RETRY_BACKOFF_S: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
#: Seconds between SSH keepalives on an idle connection.
KEEPALIVE_S = 30
#: After a command exits, how long to wait for output still in flight before giving up on it
#: (a background process of the command may hold stdout open forever).
DRAIN_S = 1.0
#: Seconds a timed-out command's process group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 2.0
#: Lines of stderr quoted in a :class:`RemoteCommandError`.
STDERR_TAIL_LINES = 10

_CHUNK = 65536
_accept_new_lock = threading.Lock()


def _short(command: str, limit: int = 200) -> str:
    """A command as quoted in messages: its first line, at most ``limit`` characters."""
    lines = command.strip().splitlines() or [""]
    text = lines[0]
    if len(lines) > 1:
        text += " ..."
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of ``text``."""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


class RemoteCommandError(SurgeError):
    """A remote command failed: names the host, the command, the exit status and stderr."""

    def __init__(self, result: CommandResult, message: str | None = None):
        self.result = result
        if message is None:
            if result.status >= 0:
                what = f"exited with status {result.status}"
            else:
                what = "ended without an exit status (killed by a signal or connection lost)"
            message = f"host {result.host}: command {_short(result.command)!r} {what}"
        stderr = _tail(result.stderr)
        if stderr:
            message += "\n  stderr (last lines):\n" + "\n".join(
                "    " + line for line in stderr.splitlines())
        super().__init__(message)


class SshTimeout(RemoteCommandError):
    """A remote command was still running at its time limit; it has been killed."""

    def __init__(self, result: CommandResult, limit_s: float, cleanup: str):
        self.limit_s = limit_s
        self.cleanup = cleanup
        super().__init__(result, f"host {result.host}: command {_short(result.command)!r} "
                                 f"still running after {limit_s:g} s; {cleanup}")


class SshConnectError(SurgeError):
    """A host could not be reached or would not let us in (after the configured retries)."""

    def __init__(self, host: str, port: int, user: str, reason: str, attempts: int = 1,
                 earlier: list[str] | None = None):
        self.host = host
        self.port = port
        self.user = user
        self.reason = reason
        self.attempts = attempts
        message = f"ssh {user}@{host}:{port}: {reason}"
        if attempts > 1:
            message += f" ({attempts} attempts"
            others = [r for r in dict.fromkeys(earlier or []) if r != reason]
            if others:
                message += "; earlier: " + "; ".join(others)
            message += ")"
        super().__init__(message)


class SshTransferError(SurgeError):
    """An SFTP upload or download failed: names the host, the remote path and the reason."""

    def __init__(self, host: str, action: str, remote_path: str, reason: str):
        self.host = host
        self.remote_path = remote_path
        super().__init__(f"host {host}: cannot {action} {remote_path}: {reason}")


# --- host key policies ----------------------------------------------------------------------


class _HostKeyUnknown(paramiko.SSHException):
    """The host key is not in the known_hosts file and ``known_hosts`` is ``strict``."""


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    """``strict``: refuse a host whose key is not known, naming the key's fingerprint."""

    def __init__(self, known_hosts_file: str):
        self.known_hosts_file = known_hosts_file

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        raise _HostKeyUnknown(
            f"host key {key.get_name()} {key.fingerprint} of {hostname} is not in "
            f"{self.known_hosts_file} (known_hosts: strict); check it and add it there, "
            f"or use known_hosts: accept-new")


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """``accept-new``: accept an unknown key and append it to the known_hosts file.

    Appends under a process-wide lock instead of rewriting the file (as paramiko's
    AutoAddPolicy does), so sessions to several hosts connecting at once keep every key.
    """

    def __init__(self, known_hosts_file: str):
        self.known_hosts_file = known_hosts_file

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        with _accept_new_lock:
            path = Path(self.known_hosts_file)
            if path.exists():
                saved = paramiko.HostKeys(str(path))
                if saved.check(hostname, key):
                    client.get_host_keys().add(hostname, key.get_name(), key)
                    return
                other = (saved.lookup(hostname) or {}).get(key.get_name())
                if other is not None:  # another session saved a different key meanwhile
                    raise paramiko.BadHostKeyException(hostname, key, other)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with path.open("a", encoding="ascii") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            client.get_host_keys().add(hostname, key.get_name(), key)
        log.info("accepted new host key %s %s of %s into %s", key.get_name(), key.fingerprint,
                 hostname, path)


class _AcceptAnySilently(paramiko.MissingHostKeyPolicy):
    """``ignore``: accept any host key and save nothing (test hosts only)."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        return None


def known_hosts_path(spec: SshSpec) -> str:
    """The known_hosts file a spec uses: ``known_hosts_file`` or ``~/.ssh/known_hosts``."""
    return os.path.expanduser(spec.known_hosts_file or "~/.ssh/known_hosts")


def host_key_policy(spec: SshSpec) -> paramiko.MissingHostKeyPolicy:
    """The paramiko policy for a host whose key is not in the known_hosts file."""
    if spec.known_hosts == "ignore":
        return _AcceptAnySilently()
    if spec.known_hosts == "accept-new":
        return _AcceptNew(known_hosts_path(spec))
    return _RejectUnknown(known_hosts_path(spec))


def connect_kwargs(spec: SshSpec) -> dict[str, object]:
    """The keyword arguments of :meth:`paramiko.SSHClient.connect` for a spec (but the host)."""
    timeout = float(spec.connect_timeout)
    kwargs: dict[str, object] = {
        "port": spec.port, "username": spec.user, "timeout": timeout,
        "banner_timeout": timeout, "auth_timeout": timeout, "channel_timeout": timeout,
    }
    if spec.key_file:
        kwargs.update(key_filename=os.path.expanduser(spec.key_file),
                      allow_agent=False, look_for_keys=False)
    else:
        kwargs.update(allow_agent=True, look_for_keys=True)
    return kwargs


def classify(exc: BaseException, spec: SshSpec) -> tuple[str, bool]:
    """Why a connection attempt failed, in words, and whether trying again may help."""
    if isinstance(exc, _HostKeyUnknown):
        return str(exc), False
    if isinstance(exc, paramiko.BadHostKeyException):
        return (f"host key {exc.key.get_name()} {exc.key.fingerprint} differs from the one in "
                f"{known_hosts_path(spec)} ({exc.expected_key.fingerprint}): the host was "
                f"reinstalled or someone is in between; check it before you replace the key"), \
            False
    if isinstance(exc, paramiko.PasswordRequiredException):
        return f"key file {spec.key_file} is encrypted; load it into an SSH agent instead", False
    if isinstance(exc, paramiko.AuthenticationException):
        keys = f"key {spec.key_file}" if spec.key_file else "the SSH agent and ~/.ssh keys"
        return f"authentication failed with {keys} ({exc})", False
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        inner = list(exc.errors.values())
        if inner and all(getattr(e, "errno", None) == errno.ECONNREFUSED for e in inner):
            return "connection refused (is sshd listening on that port?)", True
        if inner:
            return classify(inner[0], spec)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is sshd listening on that port?)", True
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {float(spec.connect_timeout):g} s", True
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})", True
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__, True
    if isinstance(exc, (paramiko.SSHException, EOFError)):
        return f"SSH handshake failed ({exc or type(exc).__name__})", True
    return f"{type(exc).__name__}: {exc}", False


# --- output handling ------------------------------------------------------------------------


class _Lines:
    """One output stream of a command: decodes bytes, keeps the text, hands out whole lines.

    With ``marker``, the first line starting with it is the shell's process id (see
    :meth:`SshSession.run`): it is taken out of the stream and kept in :attr:`pid`.
    """

    def __init__(self, name: str, on_output: Callable[[str, str], None] | None,
                 marker: str | None = None):
        self.name = name
        self.on_output = on_output
        self.marker = marker
        self.pid: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._chunks: list[str] = []

    def feed(self, data: bytes) -> None:
        """Take bytes as they arrive; complete lines go to ``on_output``."""
        self._split(self._decoder.decode(data))

    def finish(self) -> None:
        """The stream ended: a last line without a newline is a line too."""
        self._split(self._decoder.decode(b"", final=True))
        if self._partial:
            line, self._partial = self._partial, ""
            self._line(line, "")

    def text(self) -> str:
        """Everything received so far (minus the marker line)."""
        return "".join(self._chunks) + self._partial

    def _split(self, text: str) -> None:
        text = self._partial + text
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._line(line, "\n")

    def _line(self, line: str, end: str) -> None:
        if self.marker is not None and line.startswith(self.marker):
            with contextlib.suppress(ValueError):
                self.pid = int(line[len(self.marker):].strip())
            self.marker = None
            return
        self._chunks.append(line + end)
        if self.on_output is not None:
            self.on_output(self.name, line.removesuffix("\r"))


def kill_script(pid: int, grace_s: float = KILL_GRACE_S) -> str:
    """A shell command that ends process group ``pid``: SIGTERM, then SIGKILL after
    ``grace_s`` if anything of it is still there."""
    rounds = " ".join(str(i) for i in range(max(1, round(grace_s / 0.2))))
    group = f"-{int(pid)}"  # no `--` before it: dash's kill takes that for a process id
    return ("sh -c '"
            f"kill -TERM {group} 2>/dev/null || exit 0; "
            f"for i in {rounds}; do sleep 0.2 2>/dev/null || sleep 1; "
            f"kill -0 {group} 2>/dev/null || exit 0; done; "
            f"kill -KILL {group} 2>/dev/null; exit 0'")


# --- the session ----------------------------------------------------------------------------


class SshSession:
    """One SSH connection to one host: run commands, upload and download files.

    Connects on ``__enter__`` or on first use, reconnects if the connection was lost between
    two calls, and closes on ``__exit__`` / :meth:`close`. Commands may be run from several
    threads at once (each gets its own channel); file transfers are serialised.

    ``record`` receives the :class:`CommandResult` of every command run, whatever its outcome.
    """

    def __init__(self, host: str, spec: SshSpec,
                 record: Callable[[CommandResult], None] | None = None):
        self.host = host
        self.spec = spec
        self.record = record
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()
        self._sftp_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SshSession({self.spec.user}@{self.host}:{self.spec.port})"

    def __enter__(self) -> SshSession:
        self.connect()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # connection

    @property
    def connected(self) -> bool:
        """Whether the SSH connection is up."""
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    def connect(self) -> None:
        """Connect (and authenticate) unless connected; retries ``spec.retries`` times.

        Raises :class:`SshConnectError` with the last attempt's reason. Authentication
        failures and host key problems are not retried: they would fail again.
        """
        with self._lock:
            if self.connected:
                return
            self._drop()
            spec = self.spec
            if spec.key_file and not os.path.isfile(os.path.expanduser(spec.key_file)):
                raise SshConnectError(self.host, spec.port, spec.user,
                                      f"key file {spec.key_file} does not exist")
            reasons: list[str] = []
            attempts = 1 + spec.retries
            for attempt in range(attempts):
                if attempt:
                    delay = RETRY_BACKOFF_S[min(attempt - 1, len(RETRY_BACKOFF_S) - 1)]
                    log.info("ssh %s@%s:%d: %s; retrying in %g s", spec.user, self.host,
                             spec.port, reasons[-1], delay)
                    time.sleep(delay)
                try:
                    self._client = self._connect_once()
                    return
                except Exception as exc:  # every failure is classified below
                    reason, retry = classify(exc, spec)
                    reasons.append(reason)
                    if not retry:
                        break
            raise SshConnectError(self.host, spec.port, spec.user, reasons[-1],
                                  attempts=len(reasons), earlier=reasons[:-1])

    def _connect_once(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        try:
            if self.spec.known_hosts != "ignore":
                path = known_hosts_path(self.spec)
                if os.path.isfile(path):
                    client.load_host_keys(path)
            client.set_missing_host_key_policy(host_key_policy(self.spec))
            client.connect(self.host, **connect_kwargs(self.spec))  # type: ignore[arg-type]
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(KEEPALIVE_S)
            return client
        except BaseException:
            client.close()
            raise

    def _transport(self) -> paramiko.Transport:
        self.connect()
        assert self._client is not None
        transport = self._client.get_transport()
        assert transport is not None
        return transport

    def _drop(self) -> None:
        sftp, client = self._sftp, self._client
        self._sftp = self._client = None
        for thing in (sftp, client):
            if thing is not None:
                with contextlib.suppress(Exception):  # closing a broken connection
                    thing.close()

    def close(self) -> None:
        """Close the connection (idempotent). Commands still running get their channels
        closed."""
        with self._lock:
            self._drop()

    # commands

    def run(self, command: str, *, check: bool = True, timeout_s: float | None = None,
            on_output: Callable[[str, str], None] | None = None,
            input_text: str | None = None) -> CommandResult:
        """Run ``command`` in the remote user's login shell and wait for it.

        ``on_output(stream, line)`` gets each line of ``"stdout"`` and ``"stderr"`` as it
        arrives (without the newline). ``input_text`` is the command's standard input (without
        it, the command reads end-of-file). After ``timeout_s`` (default
        ``spec.command_timeout``) the command's process group is killed on the host and
        :class:`SshTimeout` is raised, whatever ``check`` says. With ``check`` (the default) a
        non-zero exit raises :class:`RemoteCommandError`; without it the result is returned.
        The result goes to ``record`` in every case.
        """
        limit = float(self.spec.command_timeout if timeout_s is None else timeout_s)
        marker = f"surge-pid-{secrets.token_hex(6)} "
        # The login shell reports its pid first; sshd made it the leader of a new process
        # group, which is what a timeout kills. A newline keeps `command` intact whatever it
        # is.
        wrapped = f"printf '{marker}%s\\n' \"$$\" >&2\n{command}"
        stdout = _Lines("stdout", on_output)
        stderr = _Lines("stderr", on_output, marker=marker)
        pending = (input_text or "").encode()
        transport = self._transport()
        start = time.monotonic()
        deadline = start + limit
        log.debug("%s: running %s", self.host, _short(command))
        try:
            channel = transport.open_session(timeout=float(self.spec.connect_timeout))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise SshConnectError(self.host, self.spec.port, self.spec.user,
                                  f"cannot open a channel for a command ({exc})") from exc
        try:
            try:
                channel.exec_command(wrapped)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise SshConnectError(self.host, self.spec.port, self.spec.user,
                                      f"the server refused to run a command ({exc})") from exc
            if not pending:
                channel.shutdown_write()
            exited_at: float | None = None
            while True:
                busy = False
                while channel.recv_ready():
                    stdout.feed(channel.recv(_CHUNK))
                    busy = True
                while channel.recv_stderr_ready():
                    stderr.feed(channel.recv_stderr(_CHUNK))
                    busy = True
                if pending and channel.send_ready():
                    try:
                        sent = channel.send(pending[:_CHUNK])
                    except (OSError, paramiko.SSHException):
                        sent = len(pending)  # the command stopped reading; drop the rest
                    pending = pending[sent:]
                    if not pending:
                        channel.shutdown_write()
                    busy = True
                now = time.monotonic()
                if channel.exit_status_ready() and not busy:
                    exited_at = exited_at or now
                    if channel.eof_received or channel.closed or now - exited_at > DRAIN_S:
                        break
                if now >= deadline:
                    cleanup = self._kill(stderr.pid)
                    channel.close()
                    stdout.finish()
                    stderr.finish()
                    result = CommandResult(self.host, command, -1, stdout.text(),
                                           stderr.text(), time.monotonic() - start)
                    self._record(result)
                    raise SshTimeout(result, limit, cleanup)
                if not busy:
                    ready, _, _ = select.select([channel], [], [], min(0.1, deadline - now))
                    if ready and not (channel.recv_ready() or channel.recv_stderr_ready()):
                        time.sleep(0.01)  # end-of-file keeps the channel readable
            status = channel.recv_exit_status()  # -1 if the channel closed without one
        finally:
            channel.close()
        stdout.finish()
        stderr.finish()
        result = CommandResult(self.host, command, status, stdout.text(), stderr.text(),
                               time.monotonic() - start)
        self._record(result)
        if check and status != 0:
            raise RemoteCommandError(result)
        return result

    def _record(self, result: CommandResult) -> None:
        log.debug("%s: %s -> %d in %.2f s", self.host, _short(result.command), result.status,
                  result.seconds)
        if self.record is not None:
            self.record(result)

    def _kill(self, pid: int | None) -> str:
        """End a timed-out command's process group; say what was done."""
        if pid is None:
            return "its process id never arrived; the channel was closed"
        try:
            channel = self._transport().open_session(timeout=float(self.spec.connect_timeout))
            try:
                channel.exec_command(kill_script(pid))
                channel.shutdown_write()
                if not channel.status_event.wait(KILL_GRACE_S + 2 + float(
                        self.spec.connect_timeout)):
                    return f"killing its process group {pid} did not finish; the channel " \
                           f"was closed"
                status = channel.recv_exit_status()
            finally:
                channel.close()
        except (paramiko.SSHException, OSError, EOFError, SurgeError) as exc:
            return f"killing its process group {pid} failed ({exc}); the channel was closed"
        if status != 0:
            return f"killing its process group {pid} ended with status {status}"
        return f"killed its process group {pid}"

    # files

    def _sftp_client(self) -> paramiko.SFTPClient:
        self.connect()
        if self._sftp is None:
            assert self._client is not None
            self._sftp = self._client.open_sftp()
            channel = self._sftp.get_channel()
            if channel is not None:
                channel.settimeout(float(self.spec.command_timeout))
        return self._sftp

    def spawn(self, command: str, input_text: str | None = None) -> RemoteProcess:
        """Start ``command`` and return at once; it runs as long as the returned process's
        channel is open. ``input_text`` goes to its standard input (e.g. a secret that must not
        show in the host's process list)."""
        transport = self._transport()
        try:
            channel = transport.open_session(timeout=float(self.spec.connect_timeout))
            channel.exec_command(command)
            if input_text:
                channel.sendall(input_text.encode())
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise SshConnectError(self.host, self.spec.port, self.spec.user,
                                  f"cannot start a command ({exc})") from exc
        return RemoteProcess(self.host, command, channel)

    def forward(self, remote_host: str, remote_port: int) -> int:
        """Forward a free local loopback port to ``remote_host:remote_port`` as the host sees
        it (``ssh -L``); returns the local port. Each accepted connection gets its own
        ``direct-tcpip`` channel; the forwarding ends with the session."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        transport = self._transport()

        def pipe(connection: socket.socket) -> None:
            try:
                channel = transport.open_channel("direct-tcpip", (remote_host, remote_port),
                                                 connection.getpeername())
            except (paramiko.SSHException, OSError):
                connection.close()
                return
            with connection, channel:
                while True:
                    ready, _, _ = select.select([connection, channel], [], [], 1.0)
                    if not transport.is_active():
                        return
                    for source, target in ((connection, channel), (channel, connection)):
                        if source in ready:
                            data = source.recv(_CHUNK)
                            if not data:
                                return
                            target.sendall(data)

        def accept() -> None:
            with listener:
                while transport.is_active():
                    listener.settimeout(1.0)
                    try:
                        connection, _ = listener.accept()
                    except TimeoutError:
                        continue
                    except OSError:
                        return
                    threading.Thread(target=pipe, args=(connection,), daemon=True).start()

        threading.Thread(target=accept, name=f"forward-{remote_port}", daemon=True).start()
        return listener.getsockname()[1]

    def upload(self, data: bytes | str | Path, remote_path: str, mode: int = 0o644) -> None:
        """Write ``data`` (bytes, text as UTF-8, or a local file) to ``remote_path`` over SFTP.

        Missing parent directories are created (mode 0755). The file is written beside its
        final name and renamed into place, so readers never see half a file. A relative path
        (or ``~/...``) is relative to the remote user's home.
        """
        path = _remote(remote_path)
        temporary = f"{path}.surge-{secrets.token_hex(4)}.tmp"
        try:
            with self._sftp_lock:
                sftp = self._sftp_client()
                _makedirs(sftp, posixpath.dirname(path))
                try:
                    if isinstance(data, Path):
                        with data.open("rb") as f:
                            sftp.putfo(f, temporary)
                    else:
                        raw = data.encode() if isinstance(data, str) else bytes(data)
                        sftp.putfo(io.BytesIO(raw), temporary)
                    sftp.chmod(temporary, mode)
                    try:
                        sftp.posix_rename(temporary, path)
                    except OSError:  # a server without the posix-rename extension
                        with contextlib.suppress(OSError):
                            sftp.remove(path)
                        sftp.rename(temporary, path)
                except BaseException:
                    with contextlib.suppress(Exception):  # best effort
                        sftp.remove(temporary)
                    raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise SshTransferError(self.host, "upload", remote_path, _why(exc)) from exc
        log.debug("%s: uploaded %s (mode %o)", self.host, remote_path, mode)

    def download(self, remote_path: str) -> bytes:
        """The content of ``remote_path`` on the host, over SFTP."""
        try:
            with self._sftp_lock:
                sftp = self._sftp_client()
                with sftp.open(_remote(remote_path), "rb") as f:
                    f.prefetch()
                    return f.read()
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise SshTransferError(self.host, "download", remote_path, _why(exc)) from exc


class RemoteProcess:
    """A long-running command on a host, tied to its SSH channel: it ends when the channel
    closes (its parent, the session's sshd, goes away), so a lost controller leaves nothing."""

    def __init__(self, host: str, command: str, channel: paramiko.Channel):
        self.host = host
        self.command = command
        self.channel = channel
        self._buffer = b""

    def readline(self, timeout_s: float) -> str:
        """The next line of its standard output ("" if none came within ``timeout_s`` or it
        ended)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if self.channel.recv_ready():
                self._buffer += self.channel.recv(_CHUNK)
            elif self.channel.exit_status_ready() or time.monotonic() > deadline:
                break
            else:
                time.sleep(0.01)
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    @property
    def alive(self) -> bool:
        """Whether the command still runs (its channel is open and it has not exited)."""
        return not (self.channel.closed or self.channel.exit_status_ready())

    def stderr_tail(self) -> str:
        """What it wrote to standard error so far (the last lines)."""
        data = b""
        while self.channel.recv_stderr_ready():
            data += self.channel.recv_stderr(_CHUNK)
        return _tail(data.decode(errors="replace"))

    def close(self) -> None:
        """Close the channel; the command loses its parent and ends."""
        self.channel.close()


def _remote(path: str) -> str:
    """SFTP does not expand ``~``: ``~/x`` is ``x`` relative to the home directory."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _makedirs(sftp: paramiko.SFTPClient, directory: str) -> None:
    """``mkdir -p`` over SFTP."""
    if directory in ("", ".", "/"):
        return
    try:
        sftp.stat(directory)
        return
    except FileNotFoundError:
        pass
    _makedirs(sftp, posixpath.dirname(directory.rstrip("/")))
    try:
        sftp.mkdir(directory, 0o755)
    except OSError:
        sftp.stat(directory)  # created meanwhile by someone else, or the real error
