"""The SSH layer against a real OpenSSH sshd on loopback (started and stopped by the test)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from orchestrator.specs.hosts import SshSpec
from tests.sshd import Sshd, free_port, keygen, missing, running_sshd
from topologies.ssh import (
    CommandResult,
    RemoteCommandError,
    SshConnectError,
    SshSession,
    SshTimeout,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def spec_for(sshd: Sshd, **changes: object) -> SshSpec:
    fields: dict[str, object] = {
        "port": sshd.port, "user": sshd.user, "key_file": str(sshd.key_file),
        "known_hosts": "strict", "known_hosts_file": str(sshd.known_hosts_file),
        "connect_timeout": 5, "command_timeout": 20, "retries": 0}
    fields.update(changes)
    return SshSpec(**fields)


@pytest.fixture
def records() -> list[CommandResult]:
    return []


@pytest.fixture
def session(sshd: Sshd, records: list[CommandResult]):
    with SshSession(sshd.host, spec_for(sshd), record=records.append) as ssh:
        yield ssh


def sleepers(sshd: Sshd) -> list[int]:
    """PIDs of ``sleep 30`` processes the test sshd started (under it or orphaned)."""
    found = []
    for process in sshd.processes():
        try:
            if process.cmdline() == ["sleep", "30"]:
                found.append(process.pid)
        except Exception:  # gone meanwhile
            continue
    return found


def test_upload_creates_directories_then_commands_read_the_file(session: SshSession,
                                                                 tmp_path: Path) -> None:
    blob = os.urandom(300_000)
    target = tmp_path / "a" / "b" / "c" / "blob.bin"
    session.upload(blob, str(target), mode=0o600)
    assert target.read_bytes() == blob
    assert target.stat().st_mode & 0o777 == 0o600
    assert not [p for p in target.parent.iterdir() if p.name != "blob.bin"], "temporary left"
    digest = session.run(f"sha256sum {target}").stdout.split()[0]
    assert digest == hashlib.sha256(blob).hexdigest()

    text = "[Channels]\n  MQIBindType=FASTPATH\n"
    session.upload(text, str(tmp_path / "qm.ini"))
    assert session.run(f"cat {tmp_path / 'qm.ini'}").stdout == text
    assert (tmp_path / "qm.ini").stat().st_mode & 0o777 == 0o644

    local = tmp_path / "local.mqsc"
    local.write_text("DEFINE QLOCAL(PERF.Q) REPLACE\n")
    session.upload(local, str(tmp_path / "x" / "uniclus.mqsc"), mode=0o640)  # overwrite too
    session.upload(local, str(tmp_path / "x" / "uniclus.mqsc"), mode=0o640)
    assert session.download(str(tmp_path / "x" / "uniclus.mqsc")) == local.read_bytes()
    assert session.download(str(target)) == blob


def test_output_arrives_line_by_line(session: SshSession) -> None:
    seen: list[tuple[float, str, str]] = []
    result = session.run("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done",
                         on_output=lambda stream, line: seen.append((time.monotonic(), stream,
                                                                     line)))
    assert [line for _, stream, line in seen if stream == "stdout"] == ["out1", "out2", "out3"]
    assert [line for _, stream, line in seen if stream == "stderr"] == ["err1", "err2", "err3"]
    first = next(t for t, _, line in seen if line == "out1")
    last = next(t for t, _, line in seen if line == "out3")
    assert last - first > 0.4, "lines came together at the end, not as they were written"
    assert result.stdout == "out1\nout2\nout3\n"
    assert result.stderr == "err1\nerr2\nerr3\n"  # the pid line is not in the output
    assert result.status == 0 and result.ok


def test_standard_input(session: SshSession) -> None:
    assert session.run("cat", input_text="hello\nworld\n").stdout == "hello\nworld\n"
    big = "x" * 1_000_000 + "\n"
    assert session.run("wc -c", input_text=big).stdout.strip() == str(len(big))
    assert session.run("cat").stdout == ""  # no input: end-of-file at once


def test_non_zero_exit(session: SshSession, sshd: Sshd) -> None:
    command = "echo creating; echo 'AMQ8041E: disk full' >&2; exit 3"
    with pytest.raises(RemoteCommandError) as caught:
        session.run(command)
    message = str(caught.value)
    assert "host 127.0.0.1" in message
    assert command in message
    assert "status 3" in message
    assert "AMQ8041E: disk full" in message
    assert caught.value.result.status == 3
    assert caught.value.result.stdout == "creating\n"

    result = session.run(command, check=False)
    assert result.status == 3 and not result.ok
    assert result.stderr == "AMQ8041E: disk full\n"


def test_timeout_kills_the_remote_command(session: SshSession, sshd: Sshd,
                                          records: list[CommandResult]) -> None:
    running: list[int] = []

    def started(stream: str, line: str) -> None:
        if line == "started":  # the sleep is about to run: it must be visible to the check
            deadline = time.monotonic() + 3
            while not running and time.monotonic() < deadline:
                running.extend(sleepers(sshd))
                time.sleep(0.02)

    begin = time.monotonic()
    with pytest.raises(SshTimeout) as caught:
        session.run("echo started; sleep 30", timeout_s=1, on_output=started)
    took = time.monotonic() - begin
    assert running, "the check never saw the remote sleep; it proves nothing"
    message = str(caught.value)
    assert "host 127.0.0.1" in message and "sleep 30" in message
    assert "still running after 1 s" in message and "killed its process group" in message
    assert took < 6
    deadline = time.monotonic() + 3
    while sleepers(sshd) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sleepers(sshd), "the timed-out command is still running on the host"
    assert records[-1].command == "echo started; sleep 30" and records[-1].status == -1
    assert records[-1].stdout == "started\n"
    assert session.run("echo still usable").stdout == "still usable\n"


def test_every_command_is_recorded(session: SshSession, records: list[CommandResult]) -> None:
    session.run("true")
    session.run("exit 4", check=False)
    with pytest.raises(RemoteCommandError):
        session.run("echo no >&2; false")
    session.close()
    session.run("echo again")  # reconnects by itself
    assert [(r.command, r.status) for r in records] == [
        ("true", 0), ("exit 4", 4), ("echo no >&2; false", 1), ("echo again", 0)]
    assert all(r.host == "127.0.0.1" and r.seconds >= 0 for r in records)
    assert records[2].stderr == "no\n"


def test_strict_known_hosts_rejects_an_unknown_key(sshd: Sshd, tmp_path: Path) -> None:
    spec = spec_for(sshd, known_hosts_file=str(tmp_path / "known_hosts"), retries=2)
    begin = time.monotonic()
    with pytest.raises(SshConnectError) as caught, SshSession(sshd.host, spec) as ssh:
        ssh.run("true")
    message = str(caught.value)
    assert f"127.0.0.1:{sshd.port}" in message and sshd.user in message
    assert "is not in" in message and "strict" in message and "SHA256:" in message
    assert caught.value.attempts == 1 and time.monotonic() - begin < 3  # not retried


def test_strict_known_hosts_rejects_a_changed_key(sshd: Sshd, tmp_path: Path) -> None:
    other = tmp_path / "other"
    keygen(other)
    fake = f"[127.0.0.1]:{sshd.port} " + " ".join(
        other.with_suffix(".pub").read_text().split()[:2])
    (tmp_path / "known_hosts").write_text(fake + "\n")
    for policy in ("strict", "accept-new"):
        spec = spec_for(sshd, known_hosts=policy, known_hosts_file=str(tmp_path / "known_hosts"))
        with pytest.raises(SshConnectError, match="differs from the one in"):
            SshSession(sshd.host, spec).connect()


def test_accept_new_saves_the_key_and_ignore_saves_nothing(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    with SshSession(sshd.host, spec_for(sshd, known_hosts="accept-new",
                                        known_hosts_file=str(known))) as ssh:
        assert ssh.run("echo hi").stdout == "hi\n"
    assert known.read_text().split() == sshd.host_key_line.split()
    with SshSession(sshd.host, spec_for(sshd, known_hosts_file=str(known))) as ssh:
        ssh.run("true")  # strict now knows it
    ignored = tmp_path / "never"
    with SshSession(sshd.host, spec_for(sshd, known_hosts="ignore",
                                        known_hosts_file=str(ignored))) as ssh:
        ssh.run("true")
    assert not ignored.exists()


def test_wrong_key_fails_authentication_without_retries(sshd: Sshd, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    spec = spec_for(sshd, key_file=str(stranger), retries=2)
    with pytest.raises(SshConnectError) as caught:
        SshSession(sshd.host, spec).connect()
    assert "authentication failed" in str(caught.value) and str(stranger) in str(caught.value)
    assert caught.value.attempts == 1


def test_closed_port_fails_after_retries(sshd: Sshd) -> None:
    port = free_port()
    spec = spec_for(sshd, port=port, retries=2)
    begin = time.monotonic()
    with pytest.raises(SshConnectError) as caught:
        SshSession("127.0.0.1", spec).run("true")
    took = time.monotonic() - begin
    message = str(caught.value)
    assert message.startswith(f"ssh {sshd.user}@127.0.0.1:{port}: connection refused")
    assert "3 attempts" in message
    assert caught.value.attempts == 3
    assert 1.4 < took < 5  # backoff 0.5 s + 1 s
