"""A member's own figures from rabbitmq_prometheus text."""

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
    assert stats.unacknowledged == 60


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
    assert stats.unacknowledged == 60 and stats.cpu.seconds == 5.408
