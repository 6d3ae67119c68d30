from pathlib import Path

import pytest

from orchestrator.errors import SpecError
from orchestrator.specs.kinds import load_any
from orchestrator.specs.loader import load_scenario, load_topology
from orchestrator.specs.plan import expand

TOPOLOGY = """\
name: t1
members: 3
start: 2
queues:
  - {name: perf, type: quorum}
"""

SCENARIO = """\
name: s1
topology: topo.yaml
workload:
  queue: perf
  senders: 4
  receivers: 4
  message: {size: 2KiB}
plan:
  - {rate_per_sender: 50, hold: 20s}
  - {rate_per_sender: +50, hold: 10s, repeat: 2}
"""


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    (tmp_path / "scen.yaml").write_text(SCENARIO)
    return tmp_path


def errors_of(path, overrides=None, loader=load_scenario) -> list[str]:
    with pytest.raises(SpecError) as caught:
        loader(path, overrides or [])
    return str(caught.value).splitlines()


def test_valid_scenario_resolves_topology_and_units(spec_dir):
    scenario, topology = load_scenario(spec_dir / "scen.yaml")
    assert scenario.workload.message.size == 2048
    assert scenario.topology == (spec_dir / "topo.yaml").resolve()
    assert topology.start == 2
    assert [p.rate_per_sender for p in expand(scenario.plan)] == [50, 100, 150]


def test_unknown_key_names_file_line_field_and_suggests(spec_dir):
    path = spec_dir / "scen.yaml"
    path.write_text(SCENARIO.replace("  senders: 4", "  sendrs: 4"))
    lines = errors_of(path)
    assert any(f"{path}:5: workload.sendrs: unknown field; did you mean 'senders'?" in line
               for line in lines)
    assert any("workload.senders: required field is missing" in line for line in lines)


def test_bad_value_names_line_and_expectation(spec_dir):
    path = spec_dir / "scen.yaml"
    path.write_text(SCENARIO.replace("2KiB", "2XB"))
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:7: workload.message.size: expected a size")


def test_overrides_are_validated_like_the_file(spec_dir):
    scenario, topology = load_scenario(spec_dir / "scen.yaml",
                                       ["workload.senders=50", "topology.cpu_per_member=1.5",
                                        "plan.1.rate_per_sender=+7"])
    assert scenario.workload.senders == 50
    assert topology.cpu_per_member == 1.5
    assert [p.rate_per_sender for p in expand(scenario.plan)] == [50, 57, 64]
    (line,) = errors_of(spec_dir / "scen.yaml", ["workload.senders=many"])
    assert "workload.senders" in line and "many" in line
    (line,) = errors_of(spec_dir / "scen.yaml", ["plan.9.hold=1s"])
    assert "plan.9" in line


def test_queue_must_exist_in_topology(spec_dir):
    path = spec_dir / "scen.yaml"
    path.write_text(SCENARIO.replace("queue: perf", "queue: nope"))
    (line,) = errors_of(path)
    assert "workload.queue" in line and "declared: perf" in line


def test_topology_rules(spec_dir):
    path = spec_dir / "topo.yaml"
    path.write_text(TOPOLOGY.replace("start: 2", "start: 5"))
    (line,) = errors_of(path, loader=load_topology)
    assert "start (5) cannot exceed members (3)" in line
    path.write_text(TOPOLOGY + "colour: blue\n")
    assert "unknown field" in errors_of(path, loader=load_topology)[0]


def test_bind_not_fixed_on_mq_queues_outside_a_cluster_is_refused(tmp_path):
    """On IBM MQ only a cluster queue's instances spread the messages of a not-fixed sender."""
    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "s.yaml"
    path.write_text((root / "scenarios" / "mq-uniform-cluster-scaling.yaml").read_text()
                    .replace("../topologies", str(root / "topologies")))
    (line,) = errors_of(path, ["workload.bind=not-fixed"])
    assert "workload.bind" in line and "ibmmq.cluster_queues: true" in line
    scenario, topology = load_scenario(path, ["workload.bind=not-fixed",
                                              "topology.ibmmq.cluster_queues=true"])
    assert (scenario.workload.bind, topology.ibmmq.cluster_queues) == ("not-fixed", True)


def test_yaml_syntax_and_missing_file(spec_dir):
    path = spec_dir / "broken.yaml"
    path.write_text("name: [unclosed\n")
    (line,) = errors_of(path, loader=load_topology)
    assert line.startswith(str(path)) and "not valid YAML" in line
    (line,) = errors_of(spec_dir / "absent.yaml", loader=load_topology)
    assert "cannot read file" in line


def test_load_any_tells_kinds_apart(spec_dir):
    assert type(load_any(spec_dir / "scen.yaml")).__name__ == "ScenarioSpec"
    assert type(load_any(spec_dir / "topo.yaml")).__name__ == "TopologySpec"


SHIPPED = ("scenarios/*.yaml", "campaigns/*.yaml", "topologies/*.yaml")


def test_shipped_specs_are_valid():
    root = Path(__file__).resolve().parents[2]
    for path in [p for pattern in SHIPPED for p in root.glob(pattern)]:
        load_any(path)


def test_the_guide_lists_every_scenario_and_campaign():
    root = Path(__file__).resolve().parents[2]
    pages = {"scenarios/*.yaml": "docs/guide/scenarios.md",
             "campaigns/*.yaml": "docs/guide/campaigns-and-capacity.md"}
    for pattern, page in pages.items():
        text = (root / page).read_text()
        unlisted = [p.name for p in root.glob(pattern) if f"`{p.name}`" not in text]
        assert not unlisted, f"{page} does not list {unlisted}"


def test_bind_on_open_on_cluster_queues_with_clients_that_reconnect_anywhere_is_refused(
        tmp_path):
    """MQ refuses it (MQRC_RECONNECT_INCOMPATIBLE): balancing may move such a client away from
    the instance it is bound to."""
    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "s.yaml"
    path.write_text((root / "scenarios" / "mq-uniform-cluster-scaling.yaml").read_text()
                    .replace("../topologies", str(root / "topologies")))
    (line,) = errors_of(path, ["topology.ibmmq.cluster_queues=true"])
    assert "workload.bind" in line and "2547" in line and "ibmmq.reconnect: qmgr or no" in line
    for fix in (["topology.ibmmq.reconnect=qmgr"], ["workload.bind=not-fixed"]):
        load_scenario(path, ["topology.ibmmq.cluster_queues=true", *fix])
