"""Stream queues in specs: their settings are a stream's, a stream is read with manual
acknowledgements from an offset surge can say, and what cannot hold is refused in one line
per field."""

import pytest
from pydantic import ValidationError

from orchestrator.errors import SpecError
from orchestrator.specs.loader import load_scenario
from orchestrator.specs.topology import QueueSpec

TOPOLOGY = ("name: t\nmembers: 1\nstart: 1\nqueues:\n"
            "  - {name: events, type: stream, max_age: 2h, segment_size: 10MiB}\n"
            "  - {name: plain}\n")


def test_a_stream_is_declared_with_its_retention_as_x_arguments():
    queue = QueueSpec.model_validate({"name": "e", "type": "stream", "max_age": "90m",
                                      "max_length_bytes": "1GiB", "segment_size": "50MiB"})
    assert queue.declared_arguments == {
        "x-queue-type": "stream", "x-max-age": "5400s", "x-max-length-bytes": 1024**3,
        "x-stream-max-segment-size-bytes": 50 * 1024**2}
    with pytest.raises(ValidationError, match="max_age: streams only"):
        QueueSpec.model_validate({"name": "e", "max_age": "1h"})
    with pytest.raises(ValidationError, match="a stream is durable and never auto-deleted"):
        QueueSpec.model_validate({"name": "e", "type": "stream", "auto_delete": True})


@pytest.mark.parametrize("workload, said", [
    ("{queue: events, senders: 1, receivers: 1, ack: auto}",
     "workload.ack: stream events is read with manual acknowledgements"),
    ("{queue: plain, senders: 1, receivers: 1, stream_offset: first}",
     "workload.stream_offset: streams only: queue plain is classic"),
    ("{queue: events, senders: 1, receivers: 1, stream_offset: yesterday}",
     "workload.stream_offset: expected first, last, next, a whole number or an ISO 8601 time"),
    ("{queue: events, senders: 1, receivers: 1, pattern: request-reply}",
     "workload.pattern: request-reply takes each request once"),
])
def test_what_a_stream_cannot_do_is_refused_naming_the_field(tmp_path, workload, said):
    (tmp_path / "t.yaml").write_text(TOPOLOGY)
    (tmp_path / "s.yaml").write_text(f"name: s\ntopology: t.yaml\nworkload: {workload}\n"
                                     f"plan: ['10:5s']\n")
    with pytest.raises(SpecError) as refused:
        load_scenario(tmp_path / "s.yaml")
    assert said in str(refused.value)


def test_a_stream_read_from_an_offset_or_a_time_loads(tmp_path):
    (tmp_path / "t.yaml").write_text(TOPOLOGY)
    for offset in ("first", "last", "next", "1200", "2026-11-26T10:00:00Z"):
        (tmp_path / "s.yaml").write_text(
            f"name: s\ntopology: t.yaml\nworkload: {{queue: events, senders: 1, receivers: 2, "
            f"stream_offset: '{offset}'}}\nplan: ['10:5s']\n".replace("'1200'", "1200"))
        scenario, _ = load_scenario(tmp_path / "s.yaml")
        assert str(scenario.workload.stream_offset) == offset


@pytest.mark.parametrize("example", ["quickstart.yaml", "mq-uniform-cluster-scaling.yaml"])
def test_a_scenario_written_out_whole_defaults_included_loads_again(tmp_path, example):
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "scenarios"
    scenario, _ = load_scenario(root / example)
    whole = scenario.model_dump(mode="json")  # every field, RabbitMQ-only defaults included
    (tmp_path / "whole.yaml").write_text(json.dumps(whole))
    again, _ = load_scenario(tmp_path / "whole.yaml")
    assert again.model_dump(exclude={"topology"}) == scenario.model_dump(exclude={"topology"})
    assert again.slo.shortfall == scenario.slo.shortfall  # a share written as percent text
