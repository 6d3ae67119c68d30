"""Each agent's newest error text becomes an event of the run, once per new text."""

from types import SimpleNamespace

from orchestrator.run.recording import AgentErrors


def second(errors: dict[int, str], counts: dict[int, int]) -> SimpleNamespace:
    """What the listener reads of a second: the agents' last errors and their rows."""
    return SimpleNamespace(errors=errors, agent_rows=[{"agent": a, "errors": n}
                                                      for a, n in counts.items()])


def test_a_new_error_text_is_an_event_and_a_repeated_one_is_only_counted():
    events: list[tuple[str, dict]] = []
    listener = AgentErrors(lambda kind, **fields: events.append((kind, fields)))
    listener.on_tick(second({}, {0: 0, 1: 0}))
    listener.on_tick(second({1: "connection lost: reset"}, {0: 0, 1: 1}))
    listener.on_tick(second({1: "connection lost: reset"}, {0: 0, 1: 4}))
    listener.on_tick(second({0: "channel closed: 404", 1: "connect failed: refused"},
                            {1: 5}))  # agent 0 missed the second: no count, the text stands
    assert events == [
        ("agent_error", {"agent": 1, "errors": 1, "error": "connection lost: reset"}),
        ("agent_error", {"agent": 0, "errors": None, "error": "channel closed: 404"}),
        ("agent_error", {"agent": 1, "errors": 5, "error": "connect failed: refused"})]
