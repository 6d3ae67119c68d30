"""Capacity under adverse conditions: the ``capacity.conditions`` spec (held faults, clear
errors), a search whose every probe runs under a held consumer slowdown on fake time, and the
answer's side-by-side table of conditions."""

import json

import pytest

from orchestrator.capacity.runner import accounting_line, check
from orchestrator.errors import SpecError
from orchestrator.specs.campaign import load_campaign
from orchestrator.specs.capacity import CapacitySpec, PriceSpec, SloSpec
from orchestrator.specs.faults import ConditionSpec
from orchestrator.specs.loader import load_scenario
from results.capacity import Search, answer, as_markdown, ranked
from tests.unit.test_capacity_plan import SaturatingAgent, searched
from tests.unit.test_controller import topology

SLO = {"p99": 0.05, "backlog": 1000, "loss": 0, "shortfall": 0.05}
TOPOLOGY = "name: t3\nmembers: 3\nqueues: [{name: q, type: quorum}]\n"


def load(tmp_path, capacity: str, ack: str = "manual"):
    (tmp_path / "t3.yaml").write_text(TOPOLOGY)
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntopology: t3.yaml\nworkload: {queue: q, senders: 2, receivers: 2,"
                    f" ack: {ack}}}\ncapacity:\n{capacity}")
    return load_scenario(path, [])


def problems(tmp_path, capacity: str, ack: str = "manual") -> list[str]:
    with pytest.raises(SpecError) as caught:
        load(tmp_path, capacity, ack)
    text = str(caught.value)
    assert str(tmp_path / "s.yaml") in text
    return [f"{p.field}: {p.message}" for p in caught.value.problems]


def test_conditions_load_and_a_fault_without_an_end_is_held_to_the_probe_end(tmp_path):
    spec, _ = load(tmp_path, "  members: [3]\n  conditions:\n    - {name: ideal}\n"
                             "    - name: member-down\n      faults: [{kind: kill_member, "
                             "member: 2, at: 2s}]\n    - name: slow\n      faults: "
                             "[{kind: consumer_slowdown, at: 0s, delay: 30ms}, {kind: "
                             "stop_member, member: 1, at: 1s, restart_after: 4s}]\n")
    ideal, down, slow = spec.capacity.searched_under
    assert ideal.faults == [] and down.name == "member-down"
    kill = down.held(down.faults[0], start_s=100.0, length_s=30.0)
    assert (kill.at, kill.restart_after, kill.member) == (102.0, 28.0, 2)
    slowed = slow.held(slow.faults[0], start_s=50.0, length_s=20.0)
    assert (slowed.at, slowed.duration, slowed.delay) == (50.0, 20.0, 0.03)
    stop = slow.held(slow.faults[1], start_s=50.0, length_s=20.0)
    assert (stop.at, stop.restart_after) == (51.0, 4.0)  # its own end stands
    assert CapacitySpec().searched_under == [ConditionSpec(name="ideal")]


@pytest.mark.parametrize(("capacity", "expected"), [
    ("  conditions: [{name: a, faults: [{kind: kill_member, member: 0, at_step: 1}]}]\n",
     "capacity.conditions.0.faults.0.at_step: a condition's fault starts at seconds into every "
     "probe: give at (0s: when the probe starts), not at_step"),
    ("  conditions: [{name: a, faults: [{kind: publish_spike, at: 0s}]}]\n",
     "capacity.conditions.0.faults.0.kind: publish_spike changes the rate the search sets: "
     "expected kill_member, stop_member, rolling_restart, consumer_slowdown, memory_alarm or "
     "delete_queues"),
    ("  conditions: [{name: a}, {name: a}]\n",
     "capacity.conditions.1.name: 'a' names two conditions: expected distinct names"),
    ("  members: [2, 3]\n  conditions: [{name: down, faults: [{kind: kill_member, member: 2, "
     "at: 0s}]}]\n",
     "capacity.conditions.0.faults.0.member: member 2 is not in a cluster of 2: expected a "
     "member index below 2, the fewest members searched"),
])
def test_a_bad_condition_is_one_line_naming_the_field_and_what_was_expected(tmp_path, capacity,
                                                                             expected):
    assert problems(tmp_path, capacity) == [expected]


def test_a_slowdown_condition_needs_manual_acks_and_faults_outside_conditions_are_refused(
        tmp_path):
    assert problems(tmp_path, "  conditions: [{name: s, faults: [{kind: consumer_slowdown, "
                              "at: 0s}]}]\n", ack="auto") == [
        "capacity.conditions.0.faults.0.kind: a consumer_slowdown needs workload.ack: manual "
        "(with auto ack the prefetch does not hold messages back)"]
    (tmp_path / "t3.yaml").write_text(TOPOLOGY)
    path = tmp_path / "f.yaml"
    path.write_text("name: s\ntopology: t3.yaml\nworkload: {queue: q, senders: 2, receivers: 2}"
                    "\nfaults: [{kind: kill_member, member: 0, at: 1s}]\ncapacity: {}\n")
    with pytest.raises(SpecError, match="held over every probe go in capacity.conditions"):
        load_scenario(path, [])


def test_the_member_counts_given_on_the_command_line_are_checked_against_the_conditions():
    spec = CapacitySpec(members=[1, 3], conditions=[ConditionSpec.model_validate(
        {"name": "down", "faults": [{"kind": "stop_member", "member": 1, "at": 0}]})])
    with pytest.raises(SpecError, match="capacity.conditions.0.faults.0.member: member 1 is "
                                        "not in a cluster of 1"):
        check(topology(members=3), spec, "s.yaml")


class SlowedAgent(SaturatingAgent):
    """Receivers that carry ``carries`` msg/s at no processing time and a third of it while a
    consumer delay is in force."""

    fast: float = 1500.0

    def set_consumer_delay(self, delay):
        self._advance()
        self.carries = self.fast / 3 if delay.seconds else self.fast
        return super().set_consumer_delay(delay)


def slowed_search(tmp_path, condition: ConditionSpec):
    return searched(tmp_path, agent=SlowedAgent, slo=SloSpec(p99="100ms"), condition=condition)


def test_every_probe_of_a_search_runs_under_its_held_condition_and_the_pause_without_it(
        tmp_path):
    ideal = slowed_search(tmp_path / "ideal", ConditionSpec(name="ideal"))[1].found.rate
    slow = ConditionSpec.model_validate({"name": "slow", "faults": [
        {"kind": "consumer_slowdown", "at": 0, "delay": "30ms"}]})
    controller, schedule, result = slowed_search(tmp_path / "slow", slow)
    assert 0.95 * 3000 <= ideal <= 3000
    assert 0.95 * 1000 <= schedule.found.rate <= 1000, schedule.found
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").open()]
    started = [e["elapsed_s"] for e in events if e["kind"] == "fault"]
    cleared = [e["elapsed_s"] for e in events if e["kind"] == "fault_cleared"]
    phases = schedule.phases
    assert started == pytest.approx([p.start_s for p in phases], abs=1.01)
    assert cleared == pytest.approx([p.end_s for p in phases], abs=1.01)
    record = json.loads((result.run_dir / "run.json").read_text())["capacity"]
    assert record["condition"] == "slow"
    assert record["faults"] == [{"kind": "consumer_slowdown", "at": 0.0, "delay": 0.03}]
    assert accounting_line(controller.accounting).startswith("exact: ")


def searches():
    """Ideal and two adverse conditions at 1 and 3 members; the member-down search's run lost
    track of some messages and one of its probes missed readings."""
    price = {1: 0.5 * 0.0425 * 730, 3: 3 * 0.5 * 0.0425 * 730}
    rates = {"ideal": {1: 4000.0, 3: 9000.0}, "member-down": {1: None, 3: 5000.0},
             "slow": {1: 1500.0, 3: 3000.0}}
    return [Search(members=n, run_dir=f"runs/{c}-{n}", rate=rates[c][n], converged=True,
                   why="held", monthly=price[n], condition=c,
                   accounting="inexact: sent 10, received 8, queued 0" if c == "member-down"
                   else "exact: 10 sent, 10 received, 0 queued",
                   probes=[{"step": 1, "missing_seconds": 2 if c == "member-down" else 0}])
            for c in rates for n in (1, 3)]


def test_the_answer_puts_each_condition_side_by_side_with_units_and_fits_only_the_first():
    document = answer(searches(), target=None, project=[6])
    text = as_markdown(document, SLO)
    assert "Under ideal conditions (the fit and projections are of these searches):" in text
    assert ("| condition | rank | members | sustainable msg/s | of ideal % | per 1,000 msg/s per "
            "month | passes all | accounting |") in text
    assert ("| ideal | 2 | 3 | 9,000 | 100 % | 5.17 USD | no target given | exact: 10 sent, 10 "
            "received, 0 queued |") in text
    assert "| ideal | 1 | 1 | 4,000 | 100 % | 3.88 USD |" in text  # one member is cheaper
    assert "| slow | 2 | 3 | 3,000 | 33 % | 15.51 USD |" in text
    assert ("| member-down | 2 | 1 | none held | unknown | unknown | no target given | inexact: "
            "sent 10, received 8, queued 0; probe 1 of 1 had seconds with readings missing |") \
        in text
    main = text.split("| condition |")[0]
    assert "| 3 | 9,000 |" in main and "| 3 | 3,000 |" not in main  # the ideal searches only
    alone = answer([s for s in searches() if s.condition == "slow"], None, [6])
    assert "| condition |" not in as_markdown(alone, SLO)
    assert alone["fit"] == answer(searches()[4:], None, [6])["fit"]


def test_conditions_are_ranked_cheapest_first_ideal_first_and_passes_all_needs_every_one():
    rows = answer(searches(), target=2500, project=[6])["conditions"]
    assert [(r["condition"], r["rank"], r["members"]) for r in rows] == [
        ("ideal", 1, 1), ("ideal", 2, 3), ("member-down", 1, 3), ("member-down", 2, 1),
        ("slow", 1, 1), ("slow", 2, 3)]
    assert {r["members"]: r["passes_all"] for r in rows} == {3: True, 1: False}
    text = as_markdown(answer(searches(), target=2500, project=[6]), SLO)
    assert "| passes all at 2,500 msg/s |" in text
    assert "| slow | 2 | 3 | 3,000 | 33 % | 15.51 USD | yes |" in text
    assert "| ideal | 1 | 1 | 4,000 | 100 % | 3.88 USD | no |" in text
    assert {r["members"]: r["passes_all"] for r in ranked(searches(), 3500)} == {3: False,
                                                                                 1: False}


def test_a_price_table_prices_a_member_as_its_instance_type_and_storage_class(tmp_path):
    price = PriceSpec.model_validate({
        "instance_types": {"c5.2xlarge": 0.34, "c5.4xlarge": 0.68},
        "storage_classes": {"gp2": 0.137, "st1": 0.43}, "instance": "c5.4xlarge",
        "storage": "gp2", "per_core_hour": 9})
    assert price.monthly(7, 0.5) == pytest.approx(7 * (0.68 + 0.137) * 730)
    assert price.priced_as == "c5.4xlarge + gp2"
    storage_only = PriceSpec.model_validate({"storage_classes": {"st1": 0.43},
                                             "storage": "st1", "per_core_hour": 0.04})
    assert storage_only.monthly(3, 0.5) == pytest.approx(3 * (0.5 * 0.04 + 0.43) * 730)
    assert problems(tmp_path, "  price: {instance_types: {small: 0.34}, instance: large}\n") \
        == ["capacity.price.instance: 'large' is not in instance_types: expected one of small"]
    document = answer(searches(), None, [6])
    document["price"] = {"hours_per_month": 730, **price.model_dump(
        include={"instance_types", "instance", "storage_classes", "storage"})}
    text = as_markdown(document, SLO)
    assert "| instance type | c5.4xlarge | 0.68 | 496.40 | yes |" in text
    assert "| storage class | st1 | 0.43 | 313.90 |  |" in text


def test_a_campaign_capacity_cell_searches_under_one_condition(tmp_path):
    load(tmp_path, "  conditions: [{name: ideal}, {name: slow, faults: [{kind: "
                   "consumer_slowdown, at: 0s}]}]\n")
    (tmp_path / "c.yaml").write_text("name: c\ncells:\n  - scenario: s.yaml\n")
    with pytest.raises(SpecError) as caught:
        load_campaign(tmp_path / "c.yaml")
    assert [(p.field, p.message) for p in caught.value.problems] == [
        ("cells.0.scenario", "a capacity cell searches under one condition: expected "
                             "capacity.conditions with at most one entry (vary it with matrix: "
                             "capacity.conditions)")]
    assert str(tmp_path / "c.yaml") in str(caught.value)
