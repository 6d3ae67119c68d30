"""What the controller asks of the queues themselves: a check before any load, and exact queue
depths during the run, for the brokers that offer them."""

from __future__ import annotations

from typing import Any, Protocol


class Preflight(Protocol):
    """Before any load: the run's clients can connect and the workload's queues exist."""

    def check(self) -> None:
        """Every endpoint accepts the run's clients and every queue exists
        (``ConnectionError`` / ``LookupError`` otherwise; :class:`drivers.base.Unchecked` where
        the check cannot be made here)."""

    def close(self) -> None:
        """Let go of any connection left open."""


class SizeCheck(Protocol):
    """A preflight that can also ask whether the broker takes messages of the run's size
    (RabbitMQ's :meth:`drivers.amqp.probe.QueueDepthProbe.check_size`)."""

    def check_size(self, size: int) -> None:
        """Every endpoint takes a message of ``size`` bytes
        (:class:`drivers.base.MessageTooLarge` otherwise)."""


class Identifies(Protocol):
    """A preflight that also learns what the broker says it is (IBM MQ's
    :meth:`drivers.mq.preflight.MqPreflight.identify`)."""

    def identify(self) -> dict[str, Any] | None:
        """After :meth:`Preflight.check`: ``product``, ``version``, ``description`` and
        ``emulated`` (a test emulator), or ``None`` if not learnt."""


class DepthProbe(Preflight, Protocol):
    """Reads the messages ready in each queue from the queues themselves."""

    def read(self) -> tuple[dict[str, int], float]:
        """``({queue: ready messages}, monotonic time of the reading)``."""


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


def preflight(broker: str, endpoints: list[str], queues: list[str],
              settings: dict[str, Any]) -> Preflight | None:
    """The pre-load check for ``broker``, connecting to each of ``endpoints`` as the run's
    clients do (the driver's ``settings``: credentials, TLS) and looking for ``queues``:
    RabbitMQ's depth probe (:meth:`drivers.amqp.probe.QueueDepthProbe.check`), IBM MQ's
    :class:`drivers.mq.preflight.MqPreflight`; ``None`` for a broker with neither."""
    if broker == "ibmmq":
        from drivers.mq.preflight import MqPreflight
        from drivers.mq.settings import MqSettings
        return MqPreflight(endpoints, queues, MqSettings.from_json(settings))
    return depth_probe(broker, endpoints, queues, settings)
