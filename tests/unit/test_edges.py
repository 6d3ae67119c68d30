"""Figures at the edge: every rate, price and plan length has a bound ``surge validate`` (and
``--set``) checks, so nothing becomes ``inf``; what is valid but probably not meant is a warning
line; a message size is checked against this machine's memory and the broker's limit."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drivers.amqp import probe as amqp_probe
from drivers.amqp.frames import FrameEncoder
from drivers.base import MessageTooLarge
from drivers.rate import unlimited_batch
from orchestrator.cli import app
from orchestrator.errors import ProvisionError
from orchestrator.run.depth import QueueDepth
from orchestrator.specs import footprint
from orchestrator.specs.limits import MAX_PLAN_S, MAX_RATE_PER_SENDER, plan_problems
from orchestrator.specs.scenario import ScenarioSpec, StepSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.fakes import FakeClock, ScriptedProvisioner
from topologies.base import Member

TOPOLOGY = "name: t\nmembers: 1\nstart: 1\nqueues: [{name: q}]\n"
GIB = 1024**3


def invoke(*args: str | Path):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


def write(directory: Path, body: str) -> Path:
    (directory / "t.yaml").write_text(TOPOLOGY)
    path = directory / "s.yaml"
    path.write_text("name: s\ntopology: t.yaml\nworkload: {queue: q, senders: 2, receivers: 1}\n"
                    + body)
    return path


WARNED = ("plan:\n"
          "  - {rate_per_sender: 10, hold: 10s}\n"
          "  - {rate_per_sender: 20, hold: 2s}\n"
          "  - {rate_per_sender: 30, hold: 3s}\n"
          "faults:\n"
          "  - {kind: publish_spike, at: 1h}\n")


def test_warnings_are_one_line_each_and_validate_still_passes(tmp_path):
    path = write(tmp_path, WARNED)
    code, out, err = invoke("validate", path)
    assert code == 0 and out == [f"{path}: ok (scenario)"]
    assert err == [
        f"{path}:6: warning: plan.1.hold: 2 s is not longer than measure.settle (3 s): the "
        f"step has no steady seconds and no row in the step table (and 1 more steps)",
        f"{path}:9: warning: faults.0.at: 3600 s is not before the plan ends (15 s): this "
        f"publish_spike never happens"]


def test_a_clean_scenario_has_no_warning(tmp_path):
    path = write(tmp_path, "plan:\n  - {rate_per_sender: 10, hold: 10s}\nfaults:\n"
                           "  - {kind: publish_spike, at: 9s}\n")
    assert invoke("validate", path) == (0, [f"{path}: ok (scenario)"], [])


def test_run_and_plan_show_the_warnings_too(tmp_path):
    path = write(tmp_path, WARNED)
    code, _, err = invoke("plan", path)
    assert code == 0 and sum("warning:" in line for line in err) == 2
    with socket.socket() as taken:  # the run stops at its metrics port, before anything starts
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, _, err = invoke("run", path, "--no-live", "--runs-dir", tmp_path / "runs",
                              "--metrics-port", str(taken.getsockname()[1]))
    assert code != 0 and sum("warning:" in line for line in err) == 2
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("override", "message"), [
    ("plan.0.rate_per_sender=1e308", "plan.0.rate_per_sender: asks a sender for 1e+308 msg/s; "
                                     "at most 1,000,000"),
    ("plan.0.rate_per_sender=100000", "asks 2000 senders for 200,000,000 msg/s in all; at most "
                                      "100,000,000"),
    ("plan.0.hold=8760h", "plan.0.hold: the plan lasts 365 days (31,536,000 s) up to here; at "
                          "most 7 days (604,800 s)"),
    ("capacity.start_rate=1e308", "capacity.start_rate: Input should be less than or equal to "
                                  "100000000"),
    ("capacity.price.per_core_hour=1e308", "capacity.price.per_core_hour: Input should be less "
                                           "than or equal to 1000"),
    ("capacity.members=[1, 1000000]", "capacity.members: 1000000 members asked for; topology t "
                                      "has 1"),
    ("workload.message.size=512MiB", "workload.message.size: 512MiB messages from 2000 senders "
                                     "and 1 receivers take about 2,000.5 GiB"),
])
def test_set_is_bounded_like_the_file(tmp_path, override, message):
    path = write(tmp_path, "plan:\n  - {rate_per_sender: 10, hold: 10s}\n")
    code, out, err = invoke("validate", path, "--set", "workload.senders=2000",
                            "--set", override)
    assert code == 2 and not out
    (line,) = err
    assert line.startswith(f"{path}:") and message in line, line


def test_capacity_rates_read_like_plan_rates(tmp_path):
    """``1e4`` is text to YAML 1.1; as a capacity rate it is the number, as in a plan."""
    path = write(tmp_path, "plan:\n  - {rate_per_sender: 1e4, hold: 10s}\n"
                           "capacity: {start_rate: 1e4, target: 2.5e4, members: [1]}\n")
    assert invoke("validate", path)[0] == 0


def step(rate, hold=1.0, repeat=1, senders=None) -> StepSpec:
    return StepSpec(rate_per_sender=rate, hold=hold, repeat=repeat, senders=senders)


@pytest.mark.parametrize(("plan", "senders", "spike", "wanted"), [
    ([step(1e6)], 1, 1.0, []),
    ([step(1e6 + 1)], 1, 1.0, [(("plan", 0, "rate_per_sender"), "1,000,001 msg/s")]),
    ([step(5e5)], 1, 2.0, []),
    ([step(5e5)], 1, 2.5, [(("plan", 0, "rate_per_sender"), "with a publish_spike of x2.5")]),
    ([step(0), step("+100", repeat=10000)], 1, 1.0, []),
    ([step(0), step("+101", repeat=10000)], 1, 1.0, [(("plan", 1, "rate_per_sender"),
                                                      "1,010,000")]),
    ([step(1e6), step("-1e6", repeat=10000)], 1, 1.0, []),  # floors at 0
    ([step(1e4, senders=[1, 10000])], 10000, 1.0, []),
    ([step(1e4 + 1, senders=[1, 10000])], 10000, 1.0, [(("plan", 0, "rate_per_sender"),
                                                         "10000 senders")]),
    ([step(1, hold=MAX_PLAN_S)], 1, 1.0, []),
    ([step(1, hold=MAX_PLAN_S / 2), step(1, hold=1, senders=[1, 1])], 1, 1.0, []),
    ([step(1, hold=3600, repeat=169)], 1, 1.0, [(("plan", 0, "hold"), "7.042 days")]),
    ([step(1e308, hold=3600, repeat=10000)] * 2, 1, 1.0,
     [(("plan", 0, "rate_per_sender"), "1e+308"), (("plan", 0, "hold"), "days")]),
])
def test_plan_bounds_table(plan, senders, spike, wanted):
    found = plan_problems(plan, senders, spike)
    assert [loc for loc, _ in found] == [loc for loc, _ in wanted]
    for (_, message), (_, part) in zip(found, wanted, strict=True):
        assert part in message, message
    assert MAX_RATE_PER_SENDER == 1e6


def scenario(size: str, senders: int, receivers: int = 1, **fields) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "m", "topology": "t.yaml", "plan": [{"rate_per_sender": 1, "hold": 1}],
        "workload": {"queue": "q", "senders": senders, "receivers": receivers,
                     "message": {"size": size}, **fields}})


def test_client_memory_against_the_machine():
    assert footprint.client_bytes(scenario("512MiB", 200)) == 401 * 512 * 1024**2
    (problem,) = footprint.memory_problems(scenario("512MiB", 200), 24 * GIB)
    assert problem[0] == ("workload", "message", "size")
    assert "512MiB messages from 200 senders and 1 receivers take about 200.5 GiB of client " \
           "memory" in problem[1] and "this machine has 24.0 GiB" in problem[1]
    assert footprint.memory_problems(scenario("512MiB", 1), 24 * GIB) == []
    assert footprint.memory_problems(scenario("64MiB", 95, 1), 24 * GIB) == []  # 11.94 GiB
    assert footprint.memory_problems(scenario("64MiB", 97, 1), 24 * GIB) != []
    replies = scenario("1MiB", 1, 1000, pattern="request-reply", reply_size="16MiB")
    assert footprint.client_bytes(replies) == 2 * 1024**2 + 1000 * 16 * 1024**2
    far = ScenarioSpec.model_validate({**scenario("512MiB", 200).model_dump(),
                                       "agents_on": {"senders": ["h1"], "receivers": ["h2"]}})
    assert footprint.memory_problems(far, 24 * GIB) == []  # the load hosts' memory is theirs


def test_a_sender_holds_the_copies_counted():
    """A large message's sender holds its template and a batch of one message: the two copies
    the memory check counts (what its connection may queue besides is not counted)."""
    size = 1024 * 1024
    template = FrameEncoder(1, "q", size, False, 131072)
    assert unlimited_batch(size) == 1
    assert len(template.batch(unlimited_batch(size), 1, 0, 0)) == template.length >= size
    assert footprint.SENDER_COPIES == 2


@pytest.mark.parametrize(("said", "limit"), [
    ("PRECONDITION_FAILED - message size 131072 is larger than configured max size 65536",
     65536),
    ("PRECONDITION_FAILED - message size 536870913 is larger than max size 536870912",
     536870912),
])
def test_the_broker_limit_is_read_from_its_words(said, limit):
    assert int(amqp_probe._LIMIT.search(said).group(1)) == limit


class TooSmall:
    """A preflight whose broker takes messages up to ``limit`` bytes."""

    def __init__(self, limit: int):
        self.limit, self.asked = limit, []

    def check(self) -> None:
        pass

    def check_size(self, size: int) -> None:
        self.asked.append(size)
        if size > self.limit:
            raise MessageTooLarge("amqp://m0:5672", size, self.limit, "said")

    def close(self) -> None:
        pass


def test_the_preflight_refuses_the_largest_message_with_one_line():
    broker = TooSmall(1024)
    clock = FakeClock()
    provisioner = ScriptedProvisioner(TopologySpec(name="t", queues=[QueueSpec(name="q")]), clock)
    depth = QueueDepth("rabbitmq", QueueSpec(name="q"), provisioner, clock, None,
                       lambda *_: broker)
    member = Member(0, "m0", "127.0.0.1", 5672, 15672, 15692, True, endpoint="amqp://m0:5672")
    workload = scenario("512", 1, 1, pattern="request-reply", reply_size=2048).workload
    with pytest.raises(ProvisionError) as refused:
        depth.check([member], workload)
    assert str(refused.value) == (
        "workload.message.size: amqp://m0:5672 refuses a message of 2,048 bytes (its "
        "max_message_size is 1,024 bytes); send smaller messages or raise the broker's "
        "max_message_size")
    assert broker.asked == [2048]
    assert depth.check([member], scenario("1KiB", 1).workload) is None


@pytest.mark.parametrize("interval", ["0", "0s", "500ms"])
def test_analyze_watch_needs_a_pause(tmp_path, interval):
    code, _, err = invoke("analyze", "--runs-dir", tmp_path, "--watch", interval)
    assert code == 2 and any(f"at least 1s between passes (got '{interval}')" in line
                             for line in err), err
