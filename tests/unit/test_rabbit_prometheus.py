"""A member's own figures from rabbitmq_prometheus text."""

from pathlib import Path

import pytest

from topologies.base import BrokerResources
from topologies.rabbitmq.prometheus import parse_node_stats, wanted_lines

TEXT = """\
# TYPE rabbitmq_connections gauge
rabbitmq_connections 14
# TYPE rabbitmq_global_messages_received_total counter
rabbitmq_global_messages_received_total{protocol="amqp091"} 4098
rabbitmq_global_messages_received_total{protocol="amqp10"} 2
# TYPE rabbitmq_global_messages_delivered_total counter
rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_quorum_queue"} 4097
rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 3
# TYPE rabbitmq_global_messages_delivered_consume_manual_ack_total counter
rabbitmq_global_messages_delivered_consume_manual_ack_total{protocol="amqp091",queue_type="q"} 4000
# TYPE rabbitmq_global_messages_delivered_get_manual_ack_total counter
rabbitmq_global_messages_delivered_get_manual_ack_total{protocol="amqp091",queue_type="q"} 10
# TYPE rabbitmq_global_messages_acknowledged_total counter
rabbitmq_global_messages_acknowledged_total{protocol="amqp091",queue_type="q"} 3950
"""


def test_figures_are_summed_over_protocols_and_queue_types():
    stats = parse_node_stats(TEXT)
    assert (stats.connections, stats.messages_in, stats.messages_out) == (14, 4100, 4100)


def test_no_unacknowledged_count_is_made_of_node_lifetime_counters():
    # deliveries less acks keeps every requeued delivery for the node's lifetime: 60 here
    # whatever the queues hold now, so no figure is made of it
    stats = parse_node_stats(TEXT)
    assert not hasattr(stats, "unacknowledged")
    kept = wanted_lines(TEXT)
    assert "manual_ack" not in kept and "acknowledged" not in kept


def test_a_missing_figure_makes_the_whole_answer_unknown():
    assert parse_node_stats(TEXT.replace("rabbitmq_connections 14\n", "")) is None


def test_only_the_families_read_are_parsed_and_the_figures_do_not_change():
    noise = """\
# HELP rabbitmq_connections_opened_total Total number of connections opened
# TYPE rabbitmq_connections_opened_total counter
rabbitmq_connections_opened_total 99
# TYPE rabbitmq_global_messages_received_confirm_total counter
rabbitmq_global_messages_received_confirm_total{protocol="amqp091"} 7
# TYPE rabbitmq_queue_messages gauge
rabbitmq_queue_messages{queue="rabbitmq_connections"} 5
# TYPE erlang_vm_statistics_runtime_milliseconds counter
erlang_vm_statistics_runtime_milliseconds 5408
"""
    page = noise + TEXT.replace("# TYPE rabbitmq_connections gauge\n",
                                "# HELP rabbitmq_connections Connections currently open\n"
                                "# TYPE rabbitmq_connections gauge\n")
    kept = wanted_lines(page)
    assert "opened" not in kept and "confirm" not in kept and "queue_messages" not in kept
    assert "# HELP rabbitmq_connections Connections currently open\n" in kept
    stats = parse_node_stats(page)
    assert (stats.connections, stats.messages_in, stats.messages_out) == (14, 4100, 4100)
    assert stats.cpu.seconds == 5.408


GOLDEN = Path(__file__).parents[1] / "golden" / "rabbitmq-prometheus"
"""Pages of a real RabbitMQ 3.10.8 node's /metrics (the families read and their neighbours):
one after 500 messages of 1 KiB were published on one connection, one with the memory high
watermark lowered until the memory alarm went off."""


def _page(name: str) -> str:
    return (GOLDEN / name).read_text()


def test_a_real_nodes_resources_are_read():
    stats = parse_node_stats(_page("node-3.10.8.txt"))
    assert (stats.connections, stats.messages_in, stats.messages_out) == (1, 500, 0)
    assert stats.resources == BrokerResources(
        memory_bytes=142667776, memory_limit_bytes=10110604083, memory_alarm=False,
        disk_free_bytes=82251792384, disk_free_limit_bytes=50000000, disk_alarm=False,
        fds_open=39, fds_max=20000, network_in_bytes=536428, network_out_bytes=559)
    assert stats.resources.memory_percent_of_watermark == pytest.approx(1.411, abs=1e-3)


def test_a_real_nodes_memory_alarm_is_read():
    resources = parse_node_stats(_page("node-3.10.8-memory-alarm.txt")).resources
    assert (resources.memory_alarm, resources.disk_alarm) == (True, False)
    assert (resources.memory_bytes, resources.memory_limit_bytes) == (141910016, 2527651)
    assert resources.memory_percent_of_watermark > 100


def test_only_the_lines_read_are_kept_from_a_real_page():
    page = _page("node-3.10.8.txt")
    kept = wanted_lines(page)
    assert "rabbitmq_process_open_tcp_sockets" not in kept
    assert "rabbitmq_connection_incoming_packets_total" not in kept
    assert "rabbitmq_connections_opened_total" not in kept
    assert "rabbitmq_alarms_file_descriptor_limit" not in kept
    assert "# HELP rabbitmq_process_max_fds Open file descriptors limit\n" in kept
    assert parse_node_stats(kept) == parse_node_stats(page)


def test_a_missing_resource_is_unknown_alone_and_the_member_still_known():
    page = "".join(line for line in _page("node-3.10.8.txt").splitlines(keepends=True)
                   if "max_fds" not in line and "alarms_memory" not in line)
    stats = parse_node_stats(page)
    assert stats.connections == 1 and stats.resources.memory_bytes == 142667776
    assert (stats.resources.fds_max, stats.resources.memory_alarm) == (None, None)
    assert parse_node_stats(TEXT).resources is None  # no resource family at all


def test_a_members_row_carries_the_resources_it_reported_and_null_for_the_rest():
    from orchestrator.run.rows import member_rows
    from orchestrator.run.sampling import TickMath
    from results.rundir.tables import SCHEMAS
    from topologies.base import MemberSample
    stats = parse_node_stats(_page("node-3.10.8-memory-alarm.txt"))
    read = MemberSample("m-0@h", True, None, None).with_stats(stats)
    silent = MemberSample("m-1@h", True, None, None).with_stats(None)
    first, second = member_rows({"t": 1.0}, [read, silent], TickMath().step(1.0, {}, [read]))
    assert (first["memory_bytes"], first["memory_limit_bytes"], first["memory_alarm"],
            first["fds_open"], first["network_in_bytes"]) == (141910016, 2527651, True, 39,
                                                              536428)
    assert first["memory_percent_of_watermark"] == pytest.approx(100 * 141910016 / 2527651)
    resource_columns = SCHEMAS["members"].names[SCHEMAS["members"].names.index("memory_bytes"):]
    assert set(resource_columns) <= set(first)
    assert all(second[c] is None for c in resource_columns)


def test_a_sample_with_a_timestamp_or_a_value_that_is_no_number():
    page = TEXT.replace("rabbitmq_connections 14\n", "rabbitmq_connections 14 1795721975000\n")
    page += ('rabbitmq_process_open_fds{node="a}b"} 39 1795721975000\n'
             "rabbitmq_process_max_fds many\n")
    stats = parse_node_stats(page)
    assert stats.connections == 14 and stats.resources.fds_open == 39
    assert stats.resources.fds_max is None
