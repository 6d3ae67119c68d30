"""The private pika hooks drivers/amqp/wire.py relies on are there, in the installed pika, with
the signatures and call paths it expects; and that pika is inside the range pyproject.toml pins.

pika is pinned to the minor versions checked here. A new pika that moves any of these fails
this test before it silently turns the fast paths off (or breaks them).
"""

from __future__ import annotations

import inspect
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from pika import connection, exceptions, frame, spec
from pika.adapters import base_connection
from pika.adapters.utils import io_services_utils

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def pika_requirement() -> Requirement:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    [pika] = [r for r in map(Requirement, dependencies) if r.name == "pika"]
    return pika


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_pika_is_pinned_to_minor_versions_and_the_installed_one_is_inside():
    pinned = pika_requirement().specifier
    assert any(s.operator == "<" for s in pinned), f"pika {pinned} has no upper bound"
    assert Version(version("pika")) in pinned, f"pika {version('pika')} is outside {pinned}"
    assert Version("1.5") not in pinned  # a new minor version is checked here before it is let in


@pytest.mark.parametrize("owner, name, expected", [
    (connection.Connection, "_adapter_emit_data", ["self", "data"]),
    (base_connection.BaseConnection, "_adapter_emit_data", ["self", "data"]),
    (connection.Connection, "_on_data_available", ["self", "data_in"]),
    (connection.Connection, "_process_frame", ["self", "frame_value"]),
])
def test_connection_methods_wire_calls_or_replaces(owner, name, expected):
    assert parameters(getattr(owner, name)) == expected


def test_received_bytes_reach_on_data_available_through_the_instance():
    # wire.install_decoder replaces the instance's _on_data_available: the adapter must look it
    # up on self each time data arrives
    source = inspect.getsource(base_connection.BaseConnection._proto_data_received)
    assert "self._on_data_available(data)" in source


def test_counters_the_heartbeat_checker_reads_are_connection_attributes():
    init_state = inspect.getsource(connection.Connection._init_connection_state)
    assert "self.bytes_received = 0" in init_state and "self.frames_received = 0" in init_state
    from pika.heartbeat import HeartbeatChecker
    assert "self._connection.bytes_received" in inspect.getsource(
        HeartbeatChecker.bytes_received_on_connection.fget)


def test_transport_read_sizes_are_class_attributes_read_through_self():
    transport = io_services_utils._AsyncTransportBase
    assert isinstance(transport._MAX_RECV_BYTES, int)
    assert isinstance(transport._MAX_CONSUME_BYTES, int)
    consume = inspect.getsource(transport._consume)
    assert "self._MAX_RECV_BYTES" in consume and "self._MAX_CONSUME_BYTES" in consume
    assert issubclass(io_services_utils._AsyncPlaintextTransport, transport)
    assert "self._transport = transport" in inspect.getsource(
        base_connection.BaseConnection._proto_connection_made)


def test_frame_and_spec_names_wire_uses():
    assert parameters(frame.decode_frame) == ["data_in"]
    assert (spec.FRAME_HEADER_SIZE, spec.FRAME_END_SIZE, spec.FRAME_BODY) == (7, 1, 3)
    assert spec.Basic.Deliver.INDEX == 0x003C003C
    assert callable(frame.Method) and callable(frame.Header)
    assert issubclass(exceptions.InvalidFrameError, Exception)


def test_the_fast_paths_trust_exactly_the_pinned_minor_versions():
    from drivers.amqp import wire
    pinned = pika_requirement().specifier
    assert all(Version(minor) in pinned for minor in wire.CHECKED_PIKA)
    assert Version(".".join(version("pika").split(".")[:2])) in map(Version, wire.CHECKED_PIKA)


@pytest.mark.parametrize("pika_version, variable, refused", [
    ("1.4.1", None, None),
    ("1.5.0", None, "pika 1.5.0 is not a version the fast paths were checked against"),
    ("1.4.1", "0", "turned off by SURGE_AMQP_FAST_PATH=0"),
])
def test_the_fast_paths_are_off_on_an_unchecked_pika_or_when_asked(monkeypatch, caplog,
                                                                   pika_version, variable,
                                                                   refused):
    import pika

    from drivers.amqp import wire
    monkeypatch.setattr(pika, "__version__", pika_version)
    if variable is None:
        monkeypatch.delenv("SURGE_AMQP_FAST_PATH", raising=False)
    else:
        monkeypatch.setenv("SURGE_AMQP_FAST_PATH", variable)
    wire.fast_path_refused.cache_clear()
    try:
        reason = wire.fast_path_refused()
        assert reason == refused or (refused is not None and reason.startswith(refused))
        assert (refused is not None) == ("fast paths off" in caplog.text)
    finally:
        wire.fast_path_refused.cache_clear()


def test_the_plaintext_transport_state_the_direct_writer_reads():
    # wire.install_direct_io sends when the transport holds nothing, else hands data to write()
    transport = io_services_utils._AsyncPlaintextTransport
    assert "self._tx_buffered_byte_count" in inspect.getsource(
        io_services_utils._AsyncTransportBase.get_write_buffer_size)
    write = inspect.getsource(transport.write)
    assert "self._state != self._STATE_ACTIVE" in write and "_buffer_tx_data(data)" in write
    assert "self._sock = sock" in inspect.getsource(io_services_utils._AsyncTransportBase.__init__)
    # pika's frames reach the socket through the instance's _adapter_emit_data, a message's
    # frames in one call of the instance's _output_marshaled_frames, which keeps the counters
    output = inspect.getsource(connection.Connection._output_marshaled_frames)
    assert "self._adapter_emit_data(" in output
    assert "self.bytes_sent +=" in output and "self.frames_sent +=" in output
    assert parameters(connection.Connection._output_marshaled_frames) == [
        "self", "marshaled_frames"]
    for sender in (connection.Connection._send_message, connection.Connection._send_frame):
        assert "self._output_marshaled_frames(" in inspect.getsource(sender)
