"""The pure parts of the SSH layer: settings from a spec, error messages, output splitting,
retry decisions (no network)."""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess

import paramiko
import pytest

from orchestrator.errors import SurgeError
from orchestrator.specs.hosts import SshSpec
from topologies import ssh
from topologies.ssh import (
    CommandResult,
    RemoteCommandError,
    SshConnectError,
    SshSession,
    SshTimeout,
    classify,
    connect_kwargs,
    host_key_policy,
    kill_script,
    known_hosts_path,
)


def test_connect_kwargs_with_a_key_file_use_only_that_key() -> None:
    kwargs = connect_kwargs(SshSpec(port=2222, user="mqm", key_file="~/keys/id",
                                    connect_timeout="7s"))
    assert kwargs["port"] == 2222 and kwargs["username"] == "mqm"
    assert kwargs["key_filename"].endswith("/keys/id") and "~" not in kwargs["key_filename"]
    assert kwargs["allow_agent"] is False and kwargs["look_for_keys"] is False
    assert kwargs["timeout"] == kwargs["banner_timeout"] == kwargs["auth_timeout"] == 7.0


def test_connect_kwargs_without_a_key_file_use_agent_and_default_keys() -> None:
    kwargs = connect_kwargs(SshSpec())
    assert "key_filename" not in kwargs
    assert kwargs["allow_agent"] is True and kwargs["look_for_keys"] is True


def test_host_key_policies() -> None:
    assert isinstance(host_key_policy(SshSpec()), ssh._RejectUnknown)
    assert isinstance(host_key_policy(SshSpec(known_hosts="accept-new")), ssh._AcceptNew)
    assert isinstance(host_key_policy(SshSpec(known_hosts="ignore")), ssh._AcceptAnySilently)
    assert known_hosts_path(SshSpec()).endswith("/.ssh/known_hosts")
    assert known_hosts_path(SshSpec(known_hosts_file="/etc/kh")) == "/etc/kh"


def test_strict_rejects_with_the_fingerprint(tmp_path) -> None:
    client = paramiko.SSHClient()
    host_key = paramiko.RSAKey.generate(1024)
    policy = host_key_policy(SshSpec(known_hosts_file=str(tmp_path / "kh")))
    with pytest.raises(paramiko.SSHException) as caught:
        policy.missing_host_key(client, "[qmhost1]:2222", host_key)
    reason, retry = classify(caught.value, SshSpec())
    assert not retry
    assert "[qmhost1]:2222" in reason and host_key.fingerprint in reason
    assert str(tmp_path / "kh") in reason and "strict" in reason


def test_accept_new_appends_and_does_not_duplicate(tmp_path) -> None:
    known = tmp_path / "dir" / "known_hosts"
    known.parent.mkdir()
    known.write_text(f"[other]:22 ssh-rsa {paramiko.RSAKey.generate(1024).get_base64()}\n")
    policy = host_key_policy(SshSpec(known_hosts="accept-new", known_hosts_file=str(known)))
    host_key = paramiko.RSAKey.generate(1024)
    for _ in range(2):
        client = paramiko.SSHClient()
        policy.missing_host_key(client, "qmhost2", host_key)
        assert client.get_host_keys().check("qmhost2", host_key)
    lines = known.read_text().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[other]:22")
    assert lines[1] == f"qmhost2 ssh-rsa {host_key.get_base64()}"
    changed = paramiko.RSAKey.generate(1024)
    with pytest.raises(paramiko.BadHostKeyException):
        policy.missing_host_key(paramiko.SSHClient(), "qmhost2", changed)


@pytest.mark.parametrize(("exc", "words", "retry"), [
    (paramiko.ssh_exception.NoValidConnectionsError(
        {("127.0.0.1", 22): OSError(errno.ECONNREFUSED, "refused")}), "connection refused", True),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused", True),
    (TimeoutError("timed out"), "timed out after 10 s", True),
    (socket.gaierror(-2, "Name or service not known"), "cannot resolve", True),
    (paramiko.SSHException("Error reading SSH protocol banner"), "handshake failed", True),
    (paramiko.AuthenticationException("Authentication failed."), "authentication failed", False),
    (paramiko.PasswordRequiredException("private key file is encrypted"), "encrypted", False),
])
def test_classify(exc: BaseException, words: str, retry: bool) -> None:
    reason, retried = classify(exc, SshSpec(key_file="/k"))
    assert words in reason
    assert retried is retry


def test_connect_retries_with_backoff_and_keeps_every_reason(monkeypatch) -> None:
    sleeps: list[float] = []
    failures = iter([TimeoutError("timed out"), ConnectionRefusedError(), ConnectionRefusedError()])
    monkeypatch.setattr(ssh.time, "sleep", sleeps.append)

    def fail(self):
        raise next(failures)

    monkeypatch.setattr(SshSession, "_connect_once", fail)
    with pytest.raises(SshConnectError) as caught:
        SshSession("qmhost1", SshSpec(user="mqm", retries=2)).connect()
    assert sleeps == [0.5, 1.0]
    assert str(caught.value) == ("ssh mqm@qmhost1:22: connection refused (is sshd listening on "
                                 "that port?) (3 attempts; earlier: timed out after 10 s)")
    assert caught.value.attempts == 3 and isinstance(caught.value, SurgeError)


def test_authentication_failure_is_not_retried(monkeypatch) -> None:
    calls = []

    def fail(self):
        calls.append(1)
        raise paramiko.AuthenticationException("Authentication failed.")

    monkeypatch.setattr(SshSession, "_connect_once", fail)
    monkeypatch.setattr(ssh.time, "sleep", lambda s: pytest.fail("slept"))
    with pytest.raises(SshConnectError, match="ssh mqm@h:22: authentication failed"):
        SshSession("h", SshSpec(retries=5)).connect()
    assert calls == [1]


def test_missing_key_file_fails_at_once(tmp_path) -> None:
    with pytest.raises(SshConnectError, match="key file .*/nope does not exist"):
        SshSession("h", SshSpec(key_file=str(tmp_path / "nope"))).connect()


def test_remote_command_error_message() -> None:
    stderr = "".join(f"line {i}\n" for i in range(30)) + "AMQ8110E: already exists\n"
    result = CommandResult("QMHost1", "crtmqm -ii /nfs1/uniclus.ini UC01QM01\nstrmqm UC01QM01",
                           36, "", stderr, 1.5)
    message = str(RemoteCommandError(result))
    assert message.startswith("host QMHost1: command 'crtmqm -ii /nfs1/uniclus.ini UC01QM01 "
                              "...' exited with status 36")
    assert "AMQ8110E: already exists" in message and "line 21" in message
    assert "line 20" not in message  # only the last lines
    timeout = SshTimeout(CommandResult("h", "sleep 30", -1, "", "", 1.0), 1.0,
                         "killed its process group 42")
    assert str(timeout) == ("host h: command 'sleep 30' still running after 1 s; "
                            "killed its process group 42")
    assert isinstance(timeout, RemoteCommandError) and timeout.result.status == -1


def test_lines_split_decode_and_take_out_the_marker() -> None:
    seen: list[tuple[str, str]] = []
    lines = ssh._Lines("stderr", lambda s, line: seen.append((s, line)), marker="M-1 ")
    for chunk in [b"login noise\nM-1 4", b"242\nfirst ", "\u00e9".encode()[:1],
                  "\u00e9".encode()[1:] + b"\r\nsecond\nlast"]:
        lines.feed(chunk)
    assert lines.pid == 4242
    assert seen == [("stderr", "login noise"), ("stderr", "first \u00e9"), ("stderr", "second")]
    lines.finish()
    assert seen[-1] == ("stderr", "last")
    assert lines.text() == "login noise\nfirst \u00e9\r\nsecond\nlast"


def test_kill_script_terminates_then_kills_the_group() -> None:
    script = kill_script(4242, grace_s=1.0)
    assert script.startswith("sh -c 'kill -TERM -4242 ")
    assert "for i in 0 1 2 3 4;" in script and "kill -0 -4242 " in script
    assert script.endswith("kill -KILL -4242 2>/dev/null; exit 0'")


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_kill_script_ends_a_process_group_locally(shell: str) -> None:
    if not shutil.which(shell):
        pytest.skip(f"no {shell}")
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # grace 0.4 s: the sleeper stays a zombie (so its group "exists") until we wait for it
        done = subprocess.run([shell, "-c", kill_script(sleeper.pid, grace_s=0.4)], timeout=10)
        assert done.returncode == 0
        assert sleeper.wait(timeout=5) == -15  # SIGTERM, no need for SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
