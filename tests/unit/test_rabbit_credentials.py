"""A topology's own Erlang cookie and broker user: made once, kept private, written where the
nodes read them; and the node configuration and environment that use them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from orchestrator.errors import ProvisionError
from topologies.base import Member
from topologies.rabbitmq import credentials, node


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_secrets_are_made_once_and_kept_private(tmp_path):
    path = tmp_path / "state" / "topo" / "credentials.json"
    made = credentials.load_or_create(path)
    assert credentials.load_or_create(path) == made == credentials.read(path)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert made.user == "surge" and len(made.password) >= 32 and len(made.cookie) >= 20
    assert made.client_settings() == {"user": "surge", "password": made.password}
    assert made.password not in repr(made) and made.cookie not in repr(made)


def test_every_topology_gets_its_own_secrets(tmp_path):
    one = credentials.load_or_create(tmp_path / "a" / "credentials.json")
    other = credentials.load_or_create(tmp_path / "b" / "credentials.json")
    assert one.cookie != other.cookie and one.password != other.password


@pytest.mark.parametrize("content", ["", "{", "[]", '{"user": "u"}',
                                     '{"user": "u", "password": "", "cookie": "c"}',
                                     '{"user": "u", "password": 1, "cookie": "c"}'])
def test_a_damaged_secrets_file_is_one_clear_error(tmp_path, content):
    path = tmp_path / "credentials.json"
    path.write_text(content)
    with pytest.raises(ProvisionError, match=r"credentials.json is damaged"):
        credentials.read(path)


def test_missing_secrets_say_the_topology_was_never_provisioned(tmp_path):
    with pytest.raises(ProvisionError, match=r"is missing.*surge up"):
        credentials.read(tmp_path / "credentials.json")


def test_the_cookie_file_is_owner_read_only_and_replaced_when_it_differs(tmp_path):
    home = tmp_path / "home"
    path = credentials.write_cookie(home, "FIRST")
    assert path == home / ".erlang.cookie" and path.read_text() == "FIRST"
    assert mode(path) == 0o400 and mode(home) == 0o700
    assert credentials.write_cookie(home, "FIRST").read_text() == "FIRST"
    assert credentials.write_cookie(home, "SECOND").read_text() == "SECOND"
    assert mode(path) == 0o400


MEMBER = Member(0, "surge-t-0@localhost", "127.0.0.1", 7950, 17950, 18050)
SECRETS = credentials.ClusterSecrets(cookie="COOKIE", user="surge", password="p" * 48)


def test_the_node_configuration_has_the_generated_user_and_no_guest():
    text = node.config_text(MEMBER, [], SECRETS)
    assert "default_user = surge\n" in text and f"default_pass = {'p' * 48}\n" in text
    assert "loopback_users" not in text and "guest" not in text
    for key in ("listeners.tcp.1 = 127.0.0.1:7950", "management.tcp.ip = 127.0.0.1",
                "prometheus.tcp.ip = 127.0.0.1"):
        assert key in text


def test_the_node_files_holding_the_password_are_private(tmp_path):
    files = node.NodeFiles(tmp_path / "member-0")
    node.write_files(MEMBER, files, [], SECRETS)
    assert mode(files.root) == 0o700 and mode(files.root / "rabbitmq.conf") == 0o600
    node.write_files(MEMBER, files, ["surge-t-1@localhost"], SECRETS)  # rewritten, still 0600
    assert mode(files.root / "rabbitmq.conf") == 0o600


def test_the_node_environment_binds_distribution_to_loopback_and_names_its_home(tmp_path):
    env = node.node_env(MEMBER, node.NodeFiles(tmp_path), 27950, 37950, tmp_path / "home")
    assert env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] == \
        "-kernel inet_dist_use_interface {127,0,0,1}"
    assert env["HOME"] == str(tmp_path / "home") and env["ERL_EPMD_PORT"] == "37950"
    assert "COOKIE" not in " ".join(env.values())


@pytest.mark.parametrize("address, args", [
    ("127.0.0.1", "-kernel inet_dist_use_interface {127,0,0,1}"),
    ("10.0.0.10", "-kernel inet_dist_use_interface {10,0,0,10}"),
    (None, "")])
def test_distribution_arguments(address, args):
    assert node.dist_args(address) == args


@pytest.mark.parametrize("address", ["::1", "localhost", "1.2.3", "1.2.3.256", "a.b.c.d"])
def test_distribution_needs_an_ipv4_address(address):
    with pytest.raises(ProvisionError, match="not an IPv4 address"):
        node.dist_args(address)
