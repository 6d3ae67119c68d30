"""The controller's reader of exact queue depths, for the brokers that offer one."""

from __future__ import annotations

from typing import Any, Protocol


class DepthProbe(Protocol):
    """Reads the messages ready in each queue from the queues themselves."""

    def check(self) -> None:
        """Every endpoint accepts the run's clients and every queue exists
        (``ConnectionError`` / ``LookupError`` otherwise)."""

    def read(self) -> tuple[dict[str, int], float]:
        """``({queue: ready messages}, monotonic time of the reading)``."""

    def close(self) -> None:
        """Let go of the connection."""


def depth_probe(broker: str, endpoints: list[str], queues: list[str],
                settings: dict[str, Any]) -> DepthProbe | None:
    """A probe for ``broker`` (RabbitMQ: passive declares over AMQP, connecting as the run's
    clients do with the driver's ``settings``), or ``None`` where the depths come from the
    broker's own metrics instead (IBM MQ's exporter)."""
    if broker == "rabbitmq":
        from drivers.amqp.probe import QueueDepthProbe
        from drivers.amqp.settings import AmqpSettings
        return QueueDepthProbe(endpoints, queues, AmqpSettings.from_json(settings))
    return None
