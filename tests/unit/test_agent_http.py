"""The agent's HTTP server against what a hostile or broken client sends: real ``surge agent``
processes on loopback, spoken to over raw sockets so that nothing tidies the requests up."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from drivers import protocol
from drivers.http import HEAD_TIMEOUT_S, MAX_OPEN
from orchestrator.agents.client import AgentHandle, read_hello
from orchestrator.cli import app
from orchestrator.errors import AgentError
from tests.flood import closed_by_peer, idle_connections
from tests.polling import eventually


@dataclass
class RunningAgent:
    """A ``surge agent`` subprocess, its handle and its stderr log."""

    handle: AgentHandle
    log: Path

    @property
    def port(self) -> int:
        return self.handle.port

    @property
    def token(self) -> str:
        return self.handle.token

    def assert_no_traceback(self) -> None:
        text = self.log.read_text(errors="replace")
        assert "Traceback" not in text, text[-3000:]


@contextlib.contextmanager
def running_agent(log: Path, *options: str) -> Iterator[RunningAgent]:
    """An agent on loopback with ``options``; asked to shut down, then killed if it lingers."""
    token = secrets.token_urlsafe(24)
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "agent", "--port", "0",
             "--max-lifetime", "120", *options],
            env=dict(os.environ, SURGE_AGENT_TOKEN=token), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=stderr)
    handle = None
    try:
        hello = read_hello(process.stdout.readline().decode(), f"agent (log: {log})")
        handle = AgentHandle(0, "127.0.0.1", hello.port, token, process)
        yield RunningAgent(handle, log)
    finally:
        if handle is not None:
            with contextlib.suppress(AgentError):
                handle.shutdown()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> Iterator[RunningAgent]:
    with running_agent(tmp_path_factory.mktemp("agent") / "agent.log") as running:
        yield running


def exchange(port: int, raw: bytes, *, half_close: bool = False) -> tuple[int, bytes]:
    """Send ``raw`` as it is; the status and body of the reply read until the agent closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(raw)
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        reply = read_all(connection)
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1."), reply[:200]
    return int(status_line.split()[1]), body


def read_all(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def request(method: str, path: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


RATE = b'{"rate_per_sender": 5}'
BEARER = "Authorization: Bearer {token}"

# (what is wrong, headers beyond Host ({token} is the agent's), body, half-close, status, error)
MALFORMED = [
    ("length not a number", [BEARER, "Content-Length: abc"], RATE, False, 400,
     "Content-Length 'abc' is not a length"),
    ("negative length", [BEARER, "Content-Length: -5"], RATE, False, 400,
     "Content-Length '-5' is not a length"),
    ("length in exponent form", [BEARER, "Content-Length: 1e3"], RATE, False, 400,
     "not a length"),
    ("length in other digits", [BEARER, "Content-Length: \xb2"], RATE, False, 400,
     "not a length"),
    ("length too long to be a number", [BEARER, "Content-Length: " + "9" * 5000], b"", False,
     413, "over the limit of 67108864 bytes"),
    ("length over the limit", [BEARER, f"Content-Length: {protocol.MAX_MESSAGE_BYTES + 1}"],
     b"", False, 413, f"a body of {protocol.MAX_MESSAGE_BYTES + 1} bytes is over the limit"),
    ("two lengths", [BEARER, "Content-Length: 22", "Content-Length: 23"], RATE, False, 400,
     "more than one Content-Length"),
    ("a body without a length", [BEARER], RATE, True, 400,
     "POST /rate needs a JSON body with a Content-Length"),
    ("a chunked body", [BEARER, "Transfer-Encoding: chunked"], b"16\r\n" + RATE + b"\r\n0\r\n\r\n",
     False, 400, "Transfer-Encoding is not accepted"),
    ("a body shorter than its length", [BEARER, "Content-Length: 50"], RATE, True, 400,
     "the body ended after 22 of 50 bytes"),
    ("a body that is not JSON", [BEARER, "Content-Length: 3"], b"{x}", False, 400,
     "bad request: Expecting property name"),
    ("a body nested beyond recursion", [BEARER, "Content-Length: 200000"], b"[" * 200000, False,
     400, "bad request: maximum recursion depth"),
    ("no token", ["Content-Length: 22"], RATE, False, 401, "missing or wrong token"),
    ("a bare token", ["Authorization: {token}", "Content-Length: 22"], RATE, False, 401,
     "missing or wrong token"),
    ("another scheme's case", ["Authorization: bearer {token}", "Content-Length: 22"], RATE,
     False, 401, "missing or wrong token"),
    ("two spaces", ["Authorization: Bearer  {token}", "Content-Length: 22"], RATE, False, 401,
     "missing or wrong token"),
    ("a token with more after it", ["Authorization: Bearer {token} x", "Content-Length: 22"],
     RATE, False, 401, "missing or wrong token"),
    ("a token cut short", ["Authorization: Bearer {short}", "Content-Length: 22"], RATE, False,
     401, "missing or wrong token"),
    ("the right token and another", [BEARER, "Authorization: Bearer other",
                                     "Content-Length: 22"], RATE, False, 401,
     "missing or wrong token"),
]


@pytest.mark.parametrize("headers, body, half_close, status, error",
                         [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_a_malformed_post_gets_a_json_error_and_no_traceback(agent, headers, body, half_close,
                                                           status, error):
    lines = [h.format(token=agent.token, short=agent.token[:-1]) for h in headers]
    got, reply = exchange(agent.port, request("POST", "/rate", *lines, body=body),
                          half_close=half_close)
    assert got == status, reply
    assert error in json.loads(reply)["error"]
    assert agent.handle.set_rate(protocol.Rate(5.0)) == protocol.RateApplied(0)
    agent.assert_no_traceback()


@pytest.mark.parametrize("raw, status, error", [
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "Bad request"),
    (request("PUT", "/rate"), 501, "Unsupported method ('PUT')"),
    (request("GET", "/" + "x" * 70000), 414, "Request-URI Too Long"),
    (request("GET", "/snapshot", *[f"X-{i}: y" for i in range(200)]), 431, "Too many headers"),
])
def test_what_http_server_refuses_itself_is_answered_in_json(agent, raw, status, error):
    got, reply = exchange(agent.port, raw)
    assert got == status and error in json.loads(reply)["error"], reply
    agent.assert_no_traceback()


def test_metrics_need_no_token_and_everything_else_does(agent):
    status, body = exchange(agent.port, request("GET", "/metrics"))
    assert status == 200 and b"surge_agent_sent_total" in body
    assert b"surge_agent_intended_latency_seconds_bucket" in body
    status, body = exchange(agent.port, request("GET", "/snapshot"))
    assert status == 401
    status, body = exchange(agent.port, request("GET", "/snapshot", f"Authorization: Bearer "
                                                                    f"{agent.token}"))
    assert status == 200 and "sent" in json.loads(body)


def test_a_message_over_the_limit_is_refused_before_it_is_sent(agent, monkeypatch):
    monkeypatch.setattr(protocol, "MAX_MESSAGE_BYTES", 1000)
    config = protocol.Configure(
        broker="rabbitmq", pattern="send-receive", message=protocol.MessageShape(sizes=(100,)),
        destination=protocol.Destination(endpoints=("amqp://127.0.0.1:1",), queue="q"),
        senders=[protocol.SenderConfig(i, 1.0, "amqp://127.0.0.1:1") for i in range(1, 50)])
    with pytest.raises(AgentError, match=r"agent 0 POST /configure: the message is [0-9,]+ "
                                         r"bytes, over the 1,000 an agent reads"):
        agent.handle.configure(config)


def test_500_idle_strangers_take_no_thread_and_keep_no_call_of_the_controller_out(tmp_path):
    with running_agent(tmp_path / "agent.log") as agent:
        process = psutil.Process(agent.handle.process.pid)
        before = process.num_threads()
        with idle_connections(agent.port, 500) as strangers:
            opened = time.monotonic()
            assert process.num_threads() <= before + 2  # none of them has a thread
            calls = 0
            while time.monotonic() - opened < 1.5:  # within the strangers' grace
                assert agent.handle.snapshot(timeout_s=5).sent == 0
                assert agent.handle.set_rate(protocol.Rate(5.0)) == protocol.RateApplied(0)
                calls += 2
            status, body = exchange(agent.port, request("GET", "/metrics"))
            assert status == 200 and b"surge_agent_sent_total" in body
            received, still_open = closed_by_peer(strangers, HEAD_TIMEOUT_S + 3)
            closed_after = time.monotonic() - opened
        assert still_open == 0 and set(received) == {b""}  # closed, no reply to no request
        assert closed_after < HEAD_TIMEOUT_S + 3 and calls >= 4
        assert eventually(lambda: process.num_threads() <= before)
        agent.assert_no_traceback()


def test_a_stranger_that_sends_part_of_a_request_gets_a_408_after_the_head_timeout(agent):
    with socket.create_connection(("127.0.0.1", agent.port), timeout=5) as connection:
        connection.sendall(b"GET /snapshot HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        reply = read_all(connection)
    assert HEAD_TIMEOUT_S - 0.1 <= time.monotonic() - started < HEAD_TIMEOUT_S + 2
    assert reply.startswith(b"HTTP/1.0 408 ") and b"no complete request within 2 s" in reply


def test_strangers_holding_requests_fill_their_own_pool_not_the_controllers(agent):
    """Heads over 64 KiB that never end are served (and stuck) in the pool without a token:
    past its 16 threads the gate answers 503, and the controller's calls still go through."""
    endless = request("GET", "/snapshot", *[f"X-{i}: {'a' * 1000}" for i in range(70)])[:-2]
    connections = []
    try:
        for _ in range(MAX_OPEN + 24):
            connections.append(socket.create_connection(("127.0.0.1", agent.port), timeout=5))
            connections[-1].sendall(endless)
        for _ in range(10):
            assert agent.handle.snapshot(timeout_s=5).sent == 0
        received, still_open = closed_by_peer(connections, HEAD_TIMEOUT_S + 3)
    finally:
        for connection in connections:
            connection.close()
    busy = [r for r in received if r.startswith(b"HTTP/1.0 503 ")]
    assert still_open == 0 and len(busy) >= 24
    assert all(b"busy: 16 requests without a token" in r for r in busy)
    agent.assert_no_traceback()


def test_an_idle_connection_is_closed_after_the_idle_timeout(tmp_path):
    with running_agent(tmp_path / "agent.log", "--idle-timeout", "0.3") as agent:
        silent = socket.create_connection(("127.0.0.1", agent.port), timeout=5)
        stalled = socket.create_connection(("127.0.0.1", agent.port), timeout=5)
        stalled.sendall(request("POST", "/rate", f"Authorization: Bearer {agent.token}",
                                "Content-Length: 50", body=b'{"rate'))
        started = time.monotonic()
        with silent, stalled:
            assert read_all(silent) == b"" and read_all(stalled) == b""  # closed, no reply
        assert 0.25 <= time.monotonic() - started < 3
        assert agent.handle.hello().port == agent.port
        agent.assert_no_traceback()


def test_the_agent_command_refuses_limits_that_would_not_serve():
    runner = CliRunner()
    for option in ("--idle-timeout=0", "--max-connections=0"):
        result = runner.invoke(app, ["agent", option])
        assert result.exit_code == 2 and "Invalid value for" in result.output, result.output




def test_the_client_says_whether_an_agent_answered_a_failed_call(agent, tmp_path):
    """A refusal (HTTP 401) is an answer: the agent runs. A closed port is none: the run may
    count the agent lost (:meth:`orchestrator.run.crew.Crew.all`)."""
    stranger = AgentHandle(0, "127.0.0.1", agent.port, "not-the-token", None)
    with pytest.raises(AgentError, match="HTTP 401") as refused:
        stranger.clock()
    assert not refused.value.unreachable
    with running_agent(tmp_path / "gone.log") as gone:
        gone.handle.shutdown()
        gone.handle.process.wait(10)
        with pytest.raises(AgentError, match="Connection refused") as unanswered:
            gone.handle.set_rate(protocol.Rate(rate_per_sender=1.0))
    assert unanswered.value.unreachable
