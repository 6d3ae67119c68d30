"""Message shapes: sizes as a mix, a range or steps, bodies of zeros, random bytes, JSON or
files, AMQP properties and the mandatory flag, from the spec to the bytes on the wire."""

import json
from collections import Counter

import pytest
from pika import frame, spec
from pydantic import ValidationError

from drivers.amqp.frames import FrameEncoder
from drivers.amqp.sender import _template_picks
from drivers.header import HEADER_SIZE, decode
from drivers.message import Bodies, PayloadBuilder
from drivers.protocol import MessageShape
from orchestrator.agents.placement import message_shape
from orchestrator.errors import SpecError
from orchestrator.specs import plan
from orchestrator.specs.loader import load_scenario
from orchestrator.specs.message import MessageSpec


def test_each_way_of_sizing_gives_its_classes_and_weights():
    mix = MessageSpec.model_validate({"sizes": [{"size": "1KiB", "weight": 3},
                                                {"size": 64}]})
    assert (mix.classes, mix.weights, mix.largest) == ([1024, 64], [3.0, 1.0], 1024)
    assert mix.mean == pytest.approx((3 * 1024 + 64) / 4)
    spread = MessageSpec.model_validate({"size_range": {"min": 100, "max": 1000,
                                                        "classes": 4}})
    assert spread.classes == [100, 400, 700, 1000] and spread.mean == 550
    steps = MessageSpec.model_validate({"size_steps": ["1000:30s", {"size": "4KiB",
                                                                    "hold": 10}, "1000:5"]})
    assert steps.classes == [1000, 4096]
    assert steps.summary == "1,000 to 4,096 B over time"
    phases = plan.size_phases(steps.size_steps)
    assert [plan.value_at(phases, t) for t in (0, 29.9, 30, 45)] == [1000, 1000, 4096, 1000]


@pytest.mark.parametrize("fields, said", [
    ({"size": 100, "sizes": [{"size": 200}]}, "give one of size, sizes"),
    ({"size_range": {"min": 500, "max": 500}}, "must be above min"),
    ({"sizes": [{"size": 10}]}, "at least 28 bytes"),
    ({"size_steps": ["20:5s"]}, "at least 28 bytes"),
    ({"payload_files": ["a.bin"], "body": "json"}, "payload_files give the body"),
    ({"properties": {"priority": 256}}, "less than or equal to 255"),
])
def test_a_message_that_cannot_be_sent_is_refused_saying_why(fields, said):
    with pytest.raises(ValidationError, match=said):
        MessageSpec.model_validate(fields)


def test_properties_are_given_as_amqp_names_them():
    given = MessageSpec.model_validate({"properties": {
        "content_type": "application/json", "expiration": "1.5s", "headers": {"kind": "a"},
        "type": "order"}}).properties.given
    assert given == {"content_type": "application/json", "type": "order",
                     "expiration": "1500", "headers": {"kind": "a"}}


def test_sizes_are_picked_by_weight_independently_of_the_routing_key():
    bodies = Bodies(MessageShape(sizes=(100, 1000), weights=(1.0, 3.0)))
    picks = bodies.picks(5, 0, 100_000)
    share = Counter(picks)[1] / len(picks)
    assert 0.74 < share < 0.76
    assert bodies.mean_size == pytest.approx(775, abs=1)
    assert [bodies.pick(5, seq) for seq in range(50)] == picks[:50]
    builder = PayloadBuilder(bodies)
    assert [len(builder.build(5, seq, 0)) for seq in range(50)] == \
        [bodies.sizes[k] for k in picks[:50]]
    keys = [0, 1, 2, 0]
    assert _template_picks(keys, bodies, 5, 0, 4) == \
        [k * 2 + c for k, c in zip(keys, bodies.picks(5, 0, 4))]


def test_sizes_set_live_take_one_class_at_a_time():
    bodies = Bodies(MessageShape(sizes=(100, 2000), weights=()))
    assert bodies.picks(1, 0, 10) is None and _template_picks(None, bodies, 1, 0, 10) == 0
    bodies.set_class(1)
    assert _template_picks(None, bodies, 1, 0, 10) == 1
    assert _template_picks([0, 1], bodies, 1, 0, 2) == [1, 3]
    with pytest.raises(ValueError, match="size class 2: this run has 2"):
        bodies.set_class(2)


@pytest.mark.parametrize("size", [30, 31, 39, 40, 56, 57, 60, 4096])
def test_json_bodies_are_documents_of_exactly_the_size(size):
    (filler,) = Bodies(MessageShape(sizes=(size,), fill="json")).fillers
    assert len(filler) == size - HEADER_SIZE
    document = json.loads(filler)
    assert set(document) == ({"id", "text"} if size > HEADER_SIZE + 27 else set()) or \
        (size <= HEADER_SIZE + 27 and set(document) == {"id", "text"})  # ids of fewer digits
    random_bytes = Bodies(MessageShape(sizes=(size,), fill="random")).fillers[0]
    assert random_bytes == Bodies(MessageShape(sizes=(size,), fill="random")).fillers[0]


def test_a_publish_template_carries_the_properties_the_flag_and_the_filler():
    properties = spec.BasicProperties(delivery_mode=2, content_type="text/plain", priority=4,
                                      headers={"kind": "order"})
    encoder = FrameEncoder(1, "key", HEADER_SIZE + 5, True, 4096, "ex", b"hello",
                           b"".join(properties.encode()), mandatory=True)
    data = bytes(encoder.batch(1, 3, 9, 1234))
    frames = []
    while data:
        used, decoded = frame.decode_frame(data)
        frames.append(decoded)
        data = data[used:]
    method, header, body = frames
    assert (method.method.exchange, method.method.routing_key, method.method.mandatory) == \
        ("ex", "key", True)
    assert (header.properties.content_type, header.properties.priority,
            header.properties.headers, header.properties.delivery_mode) == \
        ("text/plain", 4, {"kind": "order"}, 2)
    assert body.fragment[HEADER_SIZE:] == b"hello" and decode(body.fragment)[:2] == (3, 9)


def test_payload_files_are_read_relative_to_the_scenario_and_sized_by_them(tmp_path):
    (tmp_path / "bodies").mkdir()
    (tmp_path / "bodies" / "a.json").write_text('{"a": 1}')
    (tmp_path / "bodies" / "b.json").write_text('{"b": [1, 2, 3]}')
    (tmp_path / "t.yaml").write_text("name: t\nmembers: 1\nstart: 1\nqueues: [{name: q}]\n")
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(
        "name: s\ntopology: t.yaml\nworkload:\n  queue: q\n  senders: 1\n  receivers: 1\n"
        "  message:\n    payload_files: [bodies/a.json, bodies/b.json]\n"
        "plan: ['10:5s']\n")
    scenario, _ = load_scenario(scenario_file)
    assert scenario.workload.message.classes == [28 + 8, 28 + 16]
    shape = message_shape(scenario.workload.message)
    assert shape.payloads == (b'{"a": 1}', b'{"b": [1, 2, 3]}')
    assert Bodies(shape).sizes == [36, 44]
    scenario_file.write_text(scenario_file.read_text().replace("b.json", "c.json"))
    with pytest.raises(SpecError) as refused:
        load_scenario(scenario_file)
    (line,) = str(refused.value).splitlines()[-1:]
    assert "workload.message.payload_files.1" in line and "c.json" in line
