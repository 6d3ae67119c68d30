"""``surge perftest``: PerfTest 2.x command lines, as PerfTest's documentation and document
001 give them, become a scenario and a topology that validate; an option surge does not take
is refused in one line naming it; the option table of the docs is the registry itself."""

import shlex

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.specs.perftest import OPTIONS, PerfTestError, option_table, translate, write

# Document 001, "adverse conditions": a consumer slowdown (-vl) and a publish spike (-vr)
URIS = ",".join(f"amqp://guest:guest@10.0.0.{i}:5672/%2f" for i in (1, 2, 3))
DOC_001_SLOWDOWN = f"""bin/runjava com.rabbitmq.perf.PerfTest \\
-H {URIS} \\
-z 1800 -f persistent -q 1000 -c 1000 -ct -1 -ad false --rate 100 --size 1024 \\
--queue-pattern 'perf-test-%d' --queue-pattern-from 1 --queue-pattern-to 100 \\
-qa auto-delete=false,durable=false,x-queue-type=quorum --producers 200 --consumers 200 \\
--producer-random-start-delay 30 -vl 10000:300 -vl 11000:60 -vl 12000:60 -vl 30000:300 \\
-vl 10000:3000"""
DOC_001_SPIKE = f"""bin/runjava com.rabbitmq.perf.PerfTest \\
-H {URIS} \\
-z 1800 -f persistent -q 1000 -ct -1 -ad false -c 1000 --size 1024 \\
--queue-pattern 'perf-test-%d' --queue-pattern-from 1 --queue-pattern-to 100 \\
-qa auto-delete=false,durable=false,x-queue-type=quorum --producers 200 --consumers 200 \\
--producer-random-start-delay 30 --consumer-latency 10000 -vr 100:300 -vr 102:60 -vr 104:60 \\
-vr 150:60 -vr 100:3000"""

# From PerfTest's documentation: its basic usage, throughput and latency examples
TAKEN = [
    DOC_001_SLOWDOWN,
    DOC_001_SPIKE,
    'bin/runjava com.rabbitmq.perf.PerfTest -x 1 -y 2 -u "throughput-test-1" -a --id "test 1"',
    'bin/runjava com.rabbitmq.perf.PerfTest -x 2 -y 4 -u "throughput-test-2" -a --id "test 2"',
    'bin/runjava com.rabbitmq.perf.PerfTest -x 1 -y 2 -u "throughput-test-3" --id "test 3"',
    'bin/runjava com.rabbitmq.perf.PerfTest -x 2 -y 4 -u "throughput-test-4" --id "test 4" '
    '-s 4000',
    'bin/runjava com.rabbitmq.perf.PerfTest -x 1 -y 2 -u "throughput-test-5" --id "test-5" '
    '-f persistent',
    'bin/runjava com.rabbitmq.perf.PerfTest -x 2 -y 4 -u "throughput-test-6" --id "test-6" '
    '-f persistent -q 500 -c 500',
    "perf-test --queue-pattern 'perf-test-%d' --queue-pattern-from 1 --queue-pattern-to 10 "
    "--producers 100 --consumers 100",
    "perf-test --queue-pattern 'perf-test-%d' --queue-pattern-from 1 --queue-pattern-to 10 "
    "--producers 100 --consumers 100 --rate 10 --size 1000",
    "perf-test -x 1 -y 1 -vr 100:60 -vr 1000:10 -vr 500:15",
    "perf-test -x 1 -y 1 -vl 100000:60 -vl 1000000:30 -vl 500000:15",
    "perf-test --producers 10 --consumers 10 --rate 100 --producer-random-start-delay 60",
    "perf-test --quorum-queue --queue qq -x 1 -y 1",
    "perf-test -qa x-queue-type=quorum -u qq -x 2 -y 2 -r 50",
    "perf-test -h amqp://user:secret@rabbit-1:5672/%2f -x 1 -y 1 -u perf -p",
    "perf-test -H amqp://localhost:5672/%2f,amqp://localhost:5673/%2f -x 2 -y 2",
    "perf-test -e my-exchange -t topic -k orders.eu -u orders -x 1 -y 1",
    "perf-test -x 1 -y 1 -r 1000 -z 30 -i 1 -ms",
    "perf-test -x 1 -y 1 -C 10000 -s 2048 -f persistent -c 100",
    "perf-test --producers 1 --consumers 1 --time 60 --consumer-latency 1000 --qos 50",
    "java -jar perf-test.jar -x 4 -y 4 -u perf -a -z 10",
    "perf-test -x 2 -y 2 -q 1000 -A 100 -b 10 -M 8192 -c 50",
    # message shapes: variable sizes (PerfTest's documentation), JSON bodies, properties
    "perf-test -x 1 -y 1 --variable-size 1000:30 --variable-size 10000:20 "
    "--variable-size 5000:45",
    "perf-test -x 1 -y 1 -s 1000 -jb",
    "perf-test -x 1 -y 1 -mp priority=10,contentType=application/json,region=eu -f mandatory",
    "perf-test -x 1 -y 1 -e ex -t headers -mp kind=order -f persistent -f mandatory",
    "perf-test -x 1 -y 2 -Q 500 -ca x-priority=10",
    # consumers and transactions (PerfTest's documentation: "customising the workload")
    "perf-test -x 1 -y 1 -m 10 -n 5",
    "perf-test -x 1 -y 1 --disable-connection-recovery -z 20",
    "perf-test -x 1 -y 2 --polling --polling-interval 10",
    "perf-test -x 1 -y 1 -na -re false",
    "perf-test -x 2 -y 4 -R 100 -S -D 5000",
    "perf-test -x 2 -X 10 -y 2 -Y 10 -u channels -r 5",
    # streams (PerfTest's documentation: "streams" section)
    "perf-test -x 1 -y 2 -sq -u invoices -ca x-stream-offset=first",
    "perf-test -x 2 -y 2 -qa x-queue-type=stream -u events -ad false",
    "perf-test -sq -u events -x 1 -y 1 -ca x-stream-offset=2026-11-26T10:00:00Z",
]
REFUSED = [
    ("perf-test -x 1 -y 1 -K", "-K: not supported: a random UUID per message"),
    ("perf-test -x 1 -y 1 -f immediate", "-f: immediate: expected persistent or mandatory"),
    ("perf-test -x 1 -y 1 -mp messageId=7", "-mp: messageId: not supported"),
    ("perf-test -x 1 -y 1 -vs 10:30", "-vs"),
    ("perf-test -x 1 -y 1 -qa x-queue-type=lazy", "-qa: x-queue-type=lazy: classic, quorum "
                                                  "or stream"),
    ("perf-test -x 1 -y 1 --frobnicate 3", "--frobnicate: not a PerfTest option surge knows"),
    ("perf-test -x 1 -y 1 -s 12", "-s: 12: a surge message carries a 28-byte header"),
    ("perf-test --queue-pattern 'q-%d' --queue-pattern-from 5 --queue-pattern-to 10",
     "--queue-pattern-from 5: surge numbers a pattern's queues from 1"),
    ("perf-test -x 1 -y 2 -E -u shared", "-E with -u or --queue-pattern: PerfTest shares"),
    ("perf-test -x 1 -y 1 -qq", "a quorum queue (-qq, -sq or -qa x-queue-type) needs a name"),
]


@pytest.mark.parametrize("line", TAKEN)
def test_a_documented_command_line_becomes_specs_that_validate(line, tmp_path):
    done = write([line], tmp_path / "pt")
    scenario = yaml.safe_load((tmp_path / "pt" / "scenario.yaml").read_text())
    assert scenario == done.scenario
    assert scenario["workload"]["senders"] >= 1 and scenario["plan"]
    for name in ("scenario.yaml", "topology.yaml"):
        assert "secret" not in (tmp_path / "pt" / name).read_text()


def test_document_001_keeps_its_ladder_queues_and_cluster():
    done = translate([DOC_001_SPIKE])
    workload, plan = done.scenario["workload"], done.scenario["plan"]
    assert workload == {"queue": "perf-test-%d", "senders": 200, "receivers": 200,
                        "message": {"size": 1024, "persistent": True}, "prefetch": 1000,
                        "confirms": True, "confirm_window": 1000, "start_delay": "30s"}
    assert plan[0] == {"rate_per_sender": 100.0, "hold": "300s"} and len(plan) == 5
    assert done.scenario["consumer_profile"] == [{"delay": "10ms", "hold": "1s"}]
    assert done.topology["queues"] == [{"name": "perf-test-%d", "type": "quorum",
                                        "auto_delete": False, "durable": False, "count": 100}]
    assert done.topology["existing"]["members"] == [
        {"uri": f"amqp://10.0.0.{i}:5672"} for i in (1, 2, 3)]
    assert done.topology["existing"]["credentials"] == {
        "user": "guest", "password_env": "SURGE_PERFTEST_PASSWORD"}
    assert done.password == "guest"
    assert not any(note.startswith("-f:") for note in done.notes)  # -f persistent: as it is
    assert "-ct: taken: surge republishes what a lost connection left unconfirmed, never " \
           "fails the run on a timeout" in done.notes
    slowdown = translate([DOC_001_SLOWDOWN]).scenario["consumer_profile"]
    assert slowdown[0] == {"delay": "10ms", "hold": "300s"} and len(slowdown) == 5


def test_without_a_queue_name_each_consumer_has_a_queue_of_its_own_as_in_perftest():
    done = translate(shlex.split("perf-test -x 1 -y 3 -E -ad false"))
    assert done.topology["queues"] == [{"name": "perf-test", "type": "classic",
                                        "per_receiver": True}]
    assert done.topology["exchanges"] == [{"name": "direct", "type": "direct"}]
    assert done.topology["bindings"] == [{"exchange": "direct", "queue": "perf-test",
                                          "routing_key": "perf-test"}]
    workload = done.scenario["workload"]
    assert (workload["exchange"], workload["routing_key"], workload["receivers"]) == \
        ("direct", "perf-test", 3)
    keyed = translate(shlex.split("perf-test -x 1 -y 2 -e logs -t topic -k app.error"))
    assert keyed.topology["bindings"] == [{"exchange": "logs", "queue": "perf-test",
                                           "routing_key": "app.error"}]


def test_channels_per_connection_multiply_the_workers_as_perftest_does():
    workload = translate(shlex.split("perf-test -X 3 -x 2 -y 1 -Y 4 -u q")).scenario["workload"]
    assert (workload["senders"], workload["senders_per_connection"]) == (6, 3)
    assert (workload["receivers"], workload["receivers_per_connection"]) == (4, 4)
    plain = translate(shlex.split("perf-test -x 2 -X 1 -u q")).scenario["workload"]
    assert plain["senders"] == 2 and "senders_per_connection" not in plain


def test_an_exchange_line_publishes_to_it_and_binds_the_queue():
    done = translate(shlex.split("perf-test -e orders -t topic -k eu.new -u eu -x 1 -y 1"))
    assert (done.scenario["workload"]["exchange"], done.scenario["workload"]["routing_key"]) \
        == ("orders", "eu.new")
    assert done.topology["exchanges"] == [{"name": "orders", "type": "topic"}]
    assert done.topology["bindings"] == [{"exchange": "orders", "queue": "eu",
                                          "routing_key": "eu.new"}]
    fanout = translate(shlex.split("perf-test -e fan -t fanout -u subs -x 1 -y 1"))
    assert fanout.scenario["workload"]["routing_key"] == "subs"


@pytest.mark.parametrize("line, said", REFUSED)
def test_an_option_surge_cannot_take_is_refused_naming_it(line, said):
    with pytest.raises(PerfTestError) as refused:
        translate(shlex.split(line))
    assert str(refused.value).startswith(said), str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_option_table_lists_every_option_once_with_its_status():
    table = option_table()
    assert table.count("\n| `-") == len(OPTIONS)
    longs = [o.long for o in OPTIONS]
    assert len(longs) == len(set(longs)) and len(OPTIONS) >= 50
    assert all(o.status in ("Y", "partial", "N") for o in OPTIONS)
    assert "| `-x`, `--producers` | Y | workload.senders |" in table


def test_the_command_prints_the_specs_or_refuses_in_one_line(tmp_path):
    runner = CliRunner()
    printed = runner.invoke(app, ["perftest", "--print", "--out", str(tmp_path / "a"), "--",
                                  "-x", "2", "-y", "4", "-u", "orders", "-r", "500", "-z",
                                  "30"])
    assert printed.exit_code == 0, printed.output
    assert "queue: orders" in printed.output and "rate_per_sender: 500.0" in printed.output
    refused = runner.invoke(app, ["perftest", "--print", "--out", str(tmp_path / "b"), "--",
                                  "-x", "1", "-K"])
    assert refused.exit_code != 0
    assert refused.output.strip().splitlines()[-1].startswith("perftest: -K: not supported: ")


def test_message_options_become_the_message_fields(tmp_path):
    body = tmp_path / "order.json"
    body.write_text('{"order": 1}')
    message = translate(["perf-test -x 1 -y 1 -vs 1000:30 -vs 4000:10 -s 99 "
                         "-mp priority=5,expiration=60000,kind=order -f mandatory"]
                        ).scenario["workload"]["message"]
    assert message == {"size_steps": ["1000:30s", "4000:10s"], "mandatory": True,
                       "properties": {"priority": 5, "expiration": "60000ms",
                                      "headers": {"kind": "order"}}}
    workload = translate([f"perf-test -x 1 -y 1 -B {body} -Q 100"]).scenario["workload"]
    assert workload["message"] == {"payload_files": [str(body)]}
    assert (workload["prefetch"], workload["global_qos"]) == (100, True)


def test_consumer_options_become_the_workload_fields():
    done = translate(["perf-test -x 1 -y 2 -na -re false -po -pi 250 -R 50 -S -D 100 -m 20"])
    workload = done.scenario["workload"]
    assert (workload["nack"], workload["polling"], workload["polling_interval"],
            workload["consumer_rate"], workload["receiver_spacing"],
            workload["publish_transaction"]) == ("drop", True, "250ms", 50.0, "1s", 20)
    assert done.scenario["exit"] == {"messages_per_receiver": 100}
    assert translate(["perf-test -na"]).scenario["workload"]["nack"] == "requeue"
    assert "nack" not in translate(["perf-test -re false"]).scenario["workload"]
