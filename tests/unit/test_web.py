"""The live page's server and board: slices of what the controller recorded, a token off
loopback, and nothing served from outside the page's own files."""

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from drivers.http import HEAD_TIMEOUT_S
from orchestrator.web.feed import TICK_COLUMNS, Board, RunFeed
from orchestrator.web.server import WebAddressError, WebServer, is_loopback, parse_address
from tests.flood import closed_by_peer, idle_connections


def feed(run_id="r1", ticks=3):
    rows = [{"t": 100.0 + i, "elapsed_s": float(i), "phase": 1, "target_rate": 10.0,
             "send_rate": 10.0, "receive_rate": 9.0, "latency_buckets": [1, 2]}
            for i in range(ticks)]
    members = [{"elapsed_s": float(i), "member": "m0", "running": True, "cpu_percent": 20.0,
                "cpu_quota_cores": 0.5} for i in range(ticks)]
    return RunFeed(run_id, "demo", 30.0, rows, members)


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_board_gives_what_is_new_since_the_page_last_asked():
    run = feed()
    board = Board(run=run)
    first = board.view()
    assert first["tick_columns"] == TICK_COLUMNS and len(first["ticks"]) == 3
    assert first["ticks"][0][:3] == [100.0, 0.0, 1] and "latency_buckets" not in TICK_COLUMNS
    run.ticks.append({**run.ticks[-1], "elapsed_s": 3.0, "receive_rate": float("nan")})
    run.event({"t": 103.0, "kind": "member_started", "member": "m1"})
    run.event({"t": 103.0, "kind": "remote_command", "command": "x"})  # not for the page
    later = board.view(**first["next"], run_id="r1")
    assert [row[1] for row in later["ticks"]] == [3.0] and later["members"] == []
    assert later["ticks"][0][TICK_COLUMNS.index("receive_rate")] is None  # JSON has no NaN
    assert [e["kind"] for e in later["events"]] == ["member_started"]
    assert later["next"] == {"ticks": 4, "members": 3, "events": 1}
    board.run = feed("r2", ticks=2)  # the next cell of a campaign: from its start
    assert len(board.view(**later["next"], run_id="r1")["ticks"]) == 2
    board.campaign = lambda: {"name": "c", "done": 1}
    assert board.view()["campaign"] == {"name": "c", "done": 1}
    assert Board().view() == {"run": None, "campaign": None}


def test_the_page_and_its_data_are_served_on_loopback_without_a_token():
    with WebServer(Board(run=feed())) as server:
        assert server.url.startswith("http://127.0.0.1:") and "token" not in server.url
        status, page = get(server.url)
        assert status == 200 and b"/static/app.js" in page
        status, script = get(server.url + "static/uPlot.iife.min.js")
        assert status == 200 and len(script) > 40_000
        status, body = get(server.url + "api/board?ticks=1")
        assert status == 200 and len(json.loads(body)["ticks"]) == 2


def test_data_off_loopback_needs_the_token_and_files_outside_the_page_are_refused():
    with WebServer(Board(run=feed()), token="s3cret", guarded=True) as server:
        assert server.url.endswith("/?token=s3cret")
        base = server.url.split("?")[0]
        status, body = get(base + "api/board")
        assert status == 401 and "token" in json.loads(body)["error"]
        assert get(base + "api/board?token=wrong")[0] == 401
        assert get(base + "api/board?token=s3cret")[0] == 200
        assert get(base)[0] == 200  # the page itself holds no data
        for path in ("static/../server.py", "static/.hidden", "static/%2e%2e/feed.py",
                     "analysis/x.png?token=s3cret", "elsewhere"):
            assert get(base + path)[0] == 404, path
        status, body = get(base + "api/board?token=s3cret&ticks=x")
        assert status == 400 and "expected a count" in json.loads(body)["error"]
    with pytest.raises(WebAddressError, match="needs a token"):
        WebServer(Board(), guarded=True)


@pytest.mark.parametrize("query", ["ticks=%C2%B2", "ticks=" + "9" * 5000, "members=-1",
                                   "events=1e3", "ticks=%EF%BC%91", "ticks=+1"])
def test_a_query_value_that_is_no_count_gets_a_400_in_json_and_nothing_on_stderr(query, capfd):
    with WebServer(Board(run=feed())) as server:
        status, body = get(server.url + "api/board?" + query)
        assert status == 400 and "expected a count" in json.loads(body)["error"], body
        assert get(server.url + "api/board?ticks=1")[0] == 200
    assert capfd.readouterr().err == ""


def test_a_target_that_is_no_url_is_answered_and_the_server_goes_on(capfd):
    with WebServer(Board(run=feed()), token="s3cret", guarded=True) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=5) as connection:
        connection.sendall(b"GET //[x/api/board?token=s3cret HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = b"".join(iter(lambda: connection.recv(65536), b""))
        assert reply.startswith(b"HTTP/1.0 404 "), reply  # http.server makes it /[x/api/board
        assert get(server.url.split("?")[0] + "api/board?token=s3cret")[0] == 200
    assert capfd.readouterr().err == ""


def test_500_idle_strangers_do_not_keep_the_page_from_its_reader():
    with WebServer(Board(run=feed()), token="s3cret", guarded=True) as server:
        with idle_connections(server.port, 500) as strangers:
            opened = time.monotonic()
            while time.monotonic() - opened < 1.5:  # within the strangers' grace
                status, body = get(server.url.split("?")[0] + "api/board?token=s3cret")
                assert status == 200 and len(json.loads(body)["ticks"]) == 3
            assert get(server.url)[0] == 200  # the page itself, to anyone
            received, still_open = closed_by_peer(strangers, HEAD_TIMEOUT_S + 3)
        assert still_open == 0 and set(received) == {b""}
        assert time.monotonic() - opened < HEAD_TIMEOUT_S + 3


def test_addresses():
    assert parse_address("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_address("[::1]:0") == ("::1", 0)
    assert parse_address("9000") == ("127.0.0.1", 9000)
    for bad in ("host:port", "127.0.0.1:70000", ""):
        with pytest.raises(WebAddressError, match="expected HOST:PORT"):
            parse_address(bad)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_a_watched_page_gets_the_end_of_the_run_before_the_server_stops():
    board = Board(run=feed())
    board.linger(5.0)  # nobody asked: no wait
    board.view()
    assert not board.ended_shown.is_set()  # still running
    board.run.outcome = "completed"
    board.view()
    assert board.ended_shown.is_set()
    board.linger(5.0)  # seen: returns at once
