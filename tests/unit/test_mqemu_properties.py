"""Message handles and message properties (MQCRTMH, MQDLTMH, MQSETMP, MQINQMP, MQDLTMP, and the
properties MQPUT/MQGET carry) of the MQI emulator (tests/mqemu; NOT IBM MQ), driven through
IBM's own ``ibmmq.MessageHandle`` and its ``properties`` object as the MQ reference documents
them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.mqemu import mqi
from tests.unit.test_mqemu_verbs import PASSWORD, USER, connect, reason

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def qm1(qmgrs):
    return qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL(Q1)"])


def queue_pair(ibmmq, qm, name: str = "Q1"):
    C = ibmmq.CMQC
    return ibmmq.Queue(qm, name, C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)


def put_with(ibmmq, queue, body: bytes, handle) -> None:
    queue.put(body, ibmmq.MD(), ibmmq.PMO(OriginalMsgHandle=handle.get_handle()))


def get_into(ibmmq, queue, handle, options: int | None = None) -> bytes:
    C = ibmmq.CMQC
    gmo = ibmmq.GMO(Options=C.MQGMO_NO_WAIT | (C.MQGMO_PROPERTIES_IN_HANDLE
                                               if options is None else options),
                    MsgHandle=handle.get_handle())
    return queue.get(None, ibmmq.MD(), gmo)


def every_property(ibmmq, handle, pattern: str = "%") -> list[tuple[str, object]]:
    """All properties matching ``pattern``, by MQIMPO_INQ_FIRST then _INQ_NEXT until
    MQRC_PROPERTY_NOT_AVAILABLE."""
    C = ibmmq.CMQC
    found, options = [], C.MQIMPO_INQ_FIRST
    for _ in range(50):
        try:
            value, name = handle.properties.get(pattern, impo_options=options,
                                                max_value_length=200)
        except ibmmq.MQMIError as error:
            assert error.reason == C.MQRC_PROPERTY_NOT_AVAILABLE
            return found
        found.append((name, value))
        options = C.MQIMPO_INQ_NEXT
    raise AssertionError(f"no end of the inquiry: {found}")


def test_the_new_constants_and_layouts_are_ibmmqs(emulated_ibmmq):
    C = emulated_ibmmq.CMQC
    names = [n for n in dir(mqi) if n.startswith(("MQTYPE_", "MQIMPO_", "MQSMPO_", "MQDMPO_",
                                                  "MQACTP_", "MQHM_", "MQVL_", "MQCMHO_"))]
    names += [n for n in dir(mqi) if n.startswith(("MQRC_PROP", "MQGMO_PROPERTIES"))]
    assert len(names) > 30
    assert {n: getattr(mqi, n) for n in names} == {n: getattr(C, n) for n in names}
    for layout, structure in (("IMPO", "IMPO"), ("SMPO", "SMPO"), ("PD", "PD"),
                              ("DMPO", "DMPO"), ("CMHO", "CMHO")):
        fields = getattr(mqi, layout)
        values = {name: (b"%02d" % number * 8)[:int(fmt[:-1])] if fmt.endswith("s")
                  else 1000 + number for number, (name, (_, fmt)) in enumerate(fields.items())}
        packed = getattr(emulated_ibmmq, structure)(**values).pack()
        assert {name: mqi.get(fields, packed, name) for name in values} == values, layout


def test_properties_of_every_type_travel_from_put_to_get(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    queue = queue_pair(ibmmq, qm)
    sent = ibmmq.MessageHandle(qm)
    sent.properties.set("colour", "blue")
    sent.properties.set("count", 2_000_000_000, C.MQTYPE_INT32)
    sent.properties.set("big", 2**40 + 3, C.MQTYPE_INT64)
    sent.properties.set("urgent", True, C.MQTYPE_BOOLEAN)
    sent.properties.set("blob", b"\x00\x01\xff", C.MQTYPE_BYTE_STRING, value_length=3)
    sent.properties.set("ratio", 0.125, C.MQTYPE_FLOAT64)
    sent.properties.set("usr.colour", "red")  # the same property as "colour" (the usr. folder)
    put_with(ibmmq, queue, b"with properties", sent)
    got = ibmmq.MessageHandle(qm)
    assert get_into(ibmmq, queue, got) == b"with properties"
    assert got.properties.get("colour") == "red"
    assert got.properties.get("usr.count") == 2_000_000_000
    assert got.properties.get("big") == 2**40 + 3
    assert got.properties.get("urgent") == 1
    assert got.properties.get("blob") == b"\x00\x01\xff"
    assert got.properties.get("ratio") == 0.125
    assert every_property(ibmmq, got) == [("count", 2_000_000_000), ("big", 2**40 + 3),
                                          ("urgent", 1), ("blob", b"\x00\x01\xff"),
                                          ("ratio", 0.125), ("colour", "red")]
    assert sent.properties.get("colour") == "red"  # MQPUT leaves OriginalMsgHandle as it was
    sent.dlt()
    got.dlt()
    qm.disconnect()


def test_a_name_with_a_trailing_percent_walks_the_matching_properties(emulated_ibmmq,
                                                                      qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    handle = ibmmq.MessageHandle(qm)
    for name, value in (("trace.id", "t1"), ("other", "o"), ("trace.span", "s1"),
                        ("traceparent", "00-ab"), ("mqext.x", "not usr")):
        handle.properties.set(name, value)
    assert [n for n, _ in every_property(ibmmq, handle, "trace.%")] == ["trace.id",
                                                                         "trace.span"]
    assert [n for n, _ in every_property(ibmmq, handle, "trace%")] == [
        "trace.id", "trace.span", "traceparent"]  # '%' matches the period too
    assert len(every_property(ibmmq, handle)) == 5
    assert "mqext.x" not in dict(every_property(ibmmq, handle, "usr.%"))
    assert reason(ibmmq, lambda: handle.properties.get("tr%ce")) == C.MQRC_PROPERTY_NAME_ERROR
    assert reason(ibmmq, lambda: handle.properties.get("nope%")) == \
        C.MQRC_PROPERTY_NOT_AVAILABLE
    # MQIMPO_INQ_NEXT with another name than the previous call starts again (MQIMPO_INQ_FIRST)
    handle.properties.get("trace.%", impo_options=C.MQIMPO_INQ_FIRST)
    assert handle.properties.get("o%", impo_options=C.MQIMPO_INQ_NEXT) == ("o", "other")
    # the property under the cursor, again
    assert handle.properties.get("o%", impo_options=C.MQIMPO_INQ_PROP_UNDER_CURSOR) == \
        ("o", "other")
    handle.dlt()
    qm.disconnect()


def test_mqinqmp_reports_a_value_too_big_and_its_length_then_the_cursor_has_it(
        emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    handle = ibmmq.MessageHandle(qm)
    long_value = "x" * 300
    handle.properties.set("long", long_value)
    with pytest.raises(ibmmq.MQMIError) as raised:
        handle.properties.get("long", max_value_length=10)
    assert (raised.value.comp, raised.value.reason) == (C.MQCC_FAILED,
                                                        C.MQRC_PROPERTY_VALUE_TOO_BIG)
    assert raised.value.data_length == len(long_value)
    assert handle.properties.get("long", impo_options=C.MQIMPO_INQ_PROP_UNDER_CURSOR,
                                 max_value_length=raised.value.data_length) == long_value
    handle.dlt()
    qm.disconnect()


def test_types_are_kept_and_converted_only_when_asked(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    handle = ibmmq.MessageHandle(qm)
    handle.properties.set("n", 42, C.MQTYPE_INT32)
    handle.properties.set("s", "17", C.MQTYPE_STRING)
    handle.properties.set("word", "seventeen")
    assert reason(ibmmq, lambda: handle.properties.get("n", property_type=C.MQTYPE_STRING)) \
        == C.MQRC_PROPERTY_TYPE_ERROR
    convert = C.MQIMPO_CONVERT_TYPE | C.MQIMPO_CONVERT_VALUE
    assert handle.properties.get("n", impo=ibmmq.IMPO(Options=convert),
                                 property_type=C.MQTYPE_STRING) == "42"
    assert handle.properties.get("s", impo=ibmmq.IMPO(Options=convert),
                                 property_type=C.MQTYPE_INT64) == 17
    assert reason(ibmmq, lambda: handle.properties.get(
        "word", impo=ibmmq.IMPO(Options=convert), property_type=C.MQTYPE_INT32)) == \
        C.MQRC_PROP_NUMBER_FORMAT_ERROR
    handle.properties.set("n", "now a string")  # set again: the new value and type
    assert handle.properties.get("n") == "now a string"
    handle.dlt()
    qm.disconnect()


def test_names_deletes_and_unknown_handles_fail_as_the_reference_says(emulated_ibmmq,
                                                                      qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    handle = ibmmq.MessageHandle(qm)
    for bad in ("a%", "a..b", "a.", "NULL", "JMSFoo", "Root.x", "has space"):
        assert reason(ibmmq, lambda bad=bad: handle.properties.set(bad, "v")) == \
            C.MQRC_PROPERTY_NAME_ERROR, bad
    handle.properties.set("JMSCorrelationID", "allowed")
    handle.properties.set("gone", "soon")
    handle.properties.dlt("gone")
    with pytest.raises(ibmmq.MQMIError) as raised:
        handle.properties.dlt("gone")
    assert (raised.value.comp, raised.value.reason) == (C.MQCC_WARNING,
                                                        C.MQRC_PROPERTY_NOT_AVAILABLE)
    assert reason(ibmmq, lambda: handle.properties.dlt("go%")) == C.MQRC_PROPERTY_NAME_ERROR
    assert reason(ibmmq, lambda: handle.properties.get("gone")) == \
        C.MQRC_PROPERTY_NOT_AVAILABLE
    handle.properties.get("JMS%")
    handle.properties.dlt("ignored", ibmmq.DMPO(Options=C.MQDMPO_DEL_PROP_UNDER_CURSOR))
    assert reason(ibmmq, lambda: handle.properties.get("JMSCorrelationID")) == \
        C.MQRC_PROPERTY_NOT_AVAILABLE
    number = handle.get_handle()
    handle.dlt()
    stale = ibmmq.MessageHandle(qm, dup_handle=number)
    assert reason(ibmmq, lambda: stale.properties.get("x")) == C.MQRC_HMSG_ERROR
    assert reason(ibmmq, lambda: stale.properties.set("x", "y")) == C.MQRC_HMSG_ERROR
    assert reason(ibmmq, lambda: ibmmq.MessageHandle(qm, dup_handle=number + 1000)
                  .properties.dlt("x")) == C.MQRC_HMSG_ERROR
    queue = queue_pair(ibmmq, qm)
    assert reason(ibmmq, lambda: put_with(ibmmq, queue, b"x", stale)) == C.MQRC_HMSG_ERROR
    assert reason(ibmmq, lambda: get_into(ibmmq, queue, stale)) == C.MQRC_HMSG_ERROR
    qm.disconnect()


def test_which_get_options_fill_the_handle(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    queue = queue_pair(ibmmq, qm)
    sent = ibmmq.MessageHandle(qm)
    sent.properties.set("k", "v")
    for _ in range(3):
        put_with(ibmmq, queue, b"m", sent)
    got = ibmmq.MessageHandle(qm)
    get_into(ibmmq, queue, got, C.MQGMO_PROPERTIES_AS_Q_DEF)  # with a handle: into it
    assert got.properties.get("k") == "v"
    get_into(ibmmq, queue, got, C.MQGMO_NO_PROPERTIES)  # not returned; the handle unchanged
    assert got.properties.get("k") == "v"
    plain = ibmmq.MessageHandle(qm)
    get_into(ibmmq, queue, plain, C.MQGMO_NO_PROPERTIES)
    assert reason(ibmmq, lambda: plain.properties.get("k")) == C.MQRC_PROPERTY_NOT_AVAILABLE
    queue.put(b"no properties")  # a reused handle gets the new message's (none)
    get_into(ibmmq, queue, got)
    assert reason(ibmmq, lambda: got.properties.get("k")) == C.MQRC_PROPERTY_NOT_AVAILABLE
    qm.disconnect()


def test_publications_and_new_msg_handle_carry_the_properties(emulated_ibmmq,
                                                              qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    sub = ibmmq.Subscription(qm)
    sub.sub(topic_string="prices/eu")
    topic = ibmmq.Topic(qm, topic_string="prices/eu")
    topic.open(open_opts=C.MQOO_OUTPUT)
    original, new = ibmmq.MessageHandle(qm), ibmmq.MessageHandle(qm)
    original.properties.set("currency", "EUR")
    original.properties.set("venue", "XETRA")
    new.properties.set("venue", "PARIS")  # NewMsgHandle overrides OriginalMsgHandle
    topic.pub(b"42.0", ibmmq.MD(), ibmmq.PMO(OriginalMsgHandle=original.get_handle(),
                                             NewMsgHandle=new.get_handle()))
    assert new.properties.get("currency") == "EUR"  # it now reflects the message put
    got = ibmmq.MessageHandle(qm)
    gmo = ibmmq.GMO(Options=C.MQGMO_NO_WAIT | C.MQGMO_PROPERTIES_IN_HANDLE,
                    MsgHandle=got.get_handle())
    assert sub.get(None, ibmmq.MD(), gmo) == b"42.0"
    assert (got.properties.get("currency"), got.properties.get("venue")) == ("EUR", "PARIS")
    bad = ibmmq.PMO(OriginalMsgHandle=original.get_handle(), Action=9)
    assert reason(ibmmq, lambda: topic.pub(b"x", ibmmq.MD(), bad)) == C.MQRC_ACTION_ERROR
    topic.close()
    sub.close()
    qm.disconnect()


def test_a_handle_ends_with_its_connection(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    first, second = connect(ibmmq, qm1), connect(ibmmq, qm1)
    handle = ibmmq.MessageHandle(first)
    handle.properties.set("k", "v")
    other = ibmmq.MessageHandle(second, dup_handle=handle.get_handle())
    assert reason(ibmmq, lambda: other.properties.get("k")) == C.MQRC_HMSG_ERROR
    first.disconnect()
    assert reason(ibmmq, lambda: handle.properties.get("k")) == C.MQRC_HCONN_ERROR
    second.disconnect()


OTEL_CHECK = """
import sys
import ibmmq
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
assert ibmmq.otel_enabled
trace.set_tracer_provider(TracerProvider())
tracer, C = trace.get_tracer("check"), ibmmq.CMQC
qm = ibmmq.QueueManager(None)
qm.connect_with_options("QM1", cd=ibmmq.CD(ChannelName=b"C", ConnectionName=sys.argv[1].encode()),
                        user="app", password="s3cret")
queue = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)
with tracer.start_as_current_span("producer") as producer:
    queue.put(b"traced")
with tracer.start_as_current_span("consumer") as consumer:
    queue.get(None, ibmmq.MD(), ibmmq.GMO(Options=C.MQGMO_NO_WAIT | C.MQGMO_NO_PROPERTIES))
print(format(producer.get_span_context().trace_id, "032x"),
      [format(link.context.trace_id, "032x") for link in consumer.links])
"""


def test_ibmmqs_opentelemetry_hooks_propagate_the_trace_over_properties(qm1, mqemu_library):
    """ibmmq's mqotel (active without MQIPY_NOOTEL when opentelemetry is importable) puts a
    traceparent property in its own message handle and links the getter's span to it."""
    pytest.importorskip("opentelemetry.sdk.trace",
                        reason="opentelemetry-sdk is not installed: ibmmq's hooks stay off")
    env = {k: v for k, v in os.environ.items() if k != "MQIPY_NOOTEL"}
    env["LD_LIBRARY_PATH"] = str(mqemu_library.parent)
    done = subprocess.run([sys.executable, "-c", OTEL_CHECK, qm1.conname], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    trace_id, links = done.stdout.split(maxsplit=1)
    assert links.strip() == f"['{trace_id}']"
