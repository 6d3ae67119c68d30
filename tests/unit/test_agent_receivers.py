"""An agent connects its receivers when the plan starts them: the first ones at once, the
rest at the rate that starts them, each once (the driver is a recording stand-in: the
subject is the agent's bookkeeping, not a broker)."""

from drivers import agent as agent_module
from drivers import protocol


class Driver:
    def __init__(self):
        self.added, self.moved, self.where = [], [], {}

    def start(self):
        pass

    def call(self, function):
        return function()

    def add_receiver(self, role, endpoint, queue, start_delay_s):
        self.added.append(role.receiver_id)
        self.where[role.receiver_id] = endpoint

    def add_sender(self, role, endpoint, queue):
        pass

    def wake_senders(self):
        pass

    def move(self, role, endpoint, queue):
        self.moved.append(role.receiver_id)


def configured(monkeypatch, receivers: int, started: int) -> tuple[agent_module.Agent, Driver]:
    """An agent whose ``receivers`` all start on ``amqp://m0``, the first ``started`` now."""
    driver = Driver()
    monkeypatch.setattr(agent_module, "_make_driver", lambda config, recorder: driver)
    monkeypatch.setattr(agent_module.Agent, "_on_loop", lambda self, function: function())
    agent = agent_module.Agent()
    agent.configure(protocol.Configure(
        broker="rabbitmq", pattern="point-to-point", message=protocol.MessageShape(),
        destination=protocol.Destination(endpoints=("amqp://m0", "amqp://m1"), queue="q"),
        receivers=[protocol.ReceiverConfig(id=i, endpoint="amqp://m0", queue="q")
                   for i in range(1, receivers + 1)], receivers_started=started))
    return agent, driver


def test_waiting_receivers_start_with_the_rate_that_starts_them(monkeypatch):
    agent, driver = configured(monkeypatch, 4, 2)
    assert driver.added == [1, 2]
    agent.set_rate(protocol.Rate(0.0, receivers=3))
    assert driver.added == [1, 2, 3]
    agent.set_rate(protocol.Rate(0.0, receivers=3))  # started once
    agent.set_rate(protocol.Rate(0.0))  # no count: no change
    assert driver.added == [1, 2, 3]
    agent.set_rate(protocol.Rate(0.0, receivers=4))
    assert driver.added == [1, 2, 3, 4]


def test_a_waiting_receiver_moved_starts_where_it_was_moved(monkeypatch):
    agent, driver = configured(monkeypatch, 2, 1)
    agent.move(protocol.Move("amqp://m1", receivers=[1, 2]))
    assert driver.moved == [1]  # the connected one moves; the waiting one is not connected
    agent.set_rate(protocol.Rate(0.0, receivers=2))
    assert driver.where == {1: "amqp://m0", 2: "amqp://m1"}
