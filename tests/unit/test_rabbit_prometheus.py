"""A member's own figures from rabbitmq_prometheus text."""

from topologies.rabbitmq.prometheus import parse_node_stats

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
