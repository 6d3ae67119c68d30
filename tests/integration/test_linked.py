"""Document 004's messages moved between brokers: two local clusters joined by shovels,
requesters on one, servers on the other, and the cost per transaction split by part."""

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.documents import document_table
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_rows
from results.timeline import read_events
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration


def linked_topology(name: str, port_base: int, **link) -> TopologySpec:
    """Side a and side b, one member each at half a core (and the link's own member with
    ``runs_on: own``), two queue pairs on both."""
    members = 3 if link.get("runs_on") == "own" else 2
    return TopologySpec.model_validate({
        "name": name, "members": members, "start": members, "cpu_per_member": 0.5,
        "port_base": port_base, "link": {"sides": [1, 1], **link},
        "queues": [{"name": "pair-%d", "count": 2}]})


def pairs(name: str, hold: str, **more) -> ScenarioSpec:
    """Request/reply over the pairs: 4 requesters on side a, 2 responders on side b."""
    workload = {"pattern": "request-reply", "queue": "pair-%d", "senders": 4, "receivers": 2,
                "in_flight": 1, "message": {"size": "1KiB"}, **more.pop("workload", {})}
    return ScenarioSpec.model_validate({
        "name": name, "topology": "unused.yaml", "agents": 2, "workload": workload,
        "plan": [{"rate_per_sender": 0, "hold": hold, **more.pop("step", {})}],
        "measure": {"settle": "2s", "drain": more.pop("drain", "10s")}, **more})


@pytest.fixture(scope="module")
def linked(state_root):
    with local_cluster(linked_topology("linked1", 12200), state_root) as provisioner:
        yield provisioner


def test_requests_cross_the_link_and_the_cost_is_split_by_part(linked, tmp_path):
    spec = pairs("it-linked", "6s", step={"senders": [2, 4]})
    result = Controller(spec, linked.topology, tmp_path, live=False, keep_topology=True).run()
    assert result.outcome == "completed" and result.accounting.balanced, result.accounting
    manifest = read_manifest(result.run_dir)
    a, b = (m.name for m in linked.status())
    # every request went to side a and was served on side b: no reply without the link
    assert manifest.link.sides == [[a], [b]] and manifest.link.runs_in == b
    assert set(manifest.link.shovels) == {"surge-pair-1", "surge-pair-2", "surge-replies"}
    assert set(manifest.link.shovels.values()) == {"running"}
    assert manifest.agent_roles == {"0": "senders", "1": "receivers"}
    assert [(s.senders, s.queues) for s in manifest.steps] == [(2, 1), (4, 2)]
    assert all(s.achieved_rate > 0 and s.errors == 0 for s in manifest.steps)
    final = manifest.steps[-1]
    assert final.member_us_per_msg[a] > 0 and final.member_us_per_msg[b] > 0
    split = document_table("004-split", [result.run_dir])
    assert [row[0] for row in split.rows] == [
        f"broker A: member {a}", f"broker B + link: member {b}",
        "agent 0 (requesters)", "agent 1 (responders)", "total"]
    parts = [float(row[1].replace(",", "")) for row in split.rows]
    assert all(p > 0 for p in parts) and sum(parts[:-1]) == pytest.approx(parts[-1], rel=0.01)
    assert any("runs inside " + b in note for note in split.notes)


def test_a_link_down_holds_the_requests_on_side_a_and_loses_none(linked, tmp_path):
    spec = pairs("it-link-down", "14s", workload={"reply_timeout": "30s"}, drain="15s",
                 faults=[{"kind": "link_down", "at": 4, "duration": 5}])
    result = Controller(spec, linked.topology, tmp_path, live=False, keep_topology=True).run()
    accounting = result.accounting
    assert result.outcome == "completed"
    # every request answered, none lost; a request the removed shovel had delivered but not
    # yet acknowledged comes again (at least once), counted as a duplicate, never hidden
    assert accounting.received == accounting.sent and accounting.lost == 0 and \
        accounting.unexplained == 0 and accounting.still_queued == 0, accounting
    kinds = [e["kind"] for e in read_events(result.run_dir)]
    assert "link_down" in kinds and kinds.index("link_down") < kinds.index("fault_cleared")
    manifest = read_manifest(result.run_dir)
    assert manifest.accounting_details["timeouts"] == 0
    # the seconds with the link down carried nothing end to end; the others did
    ticks = read_rows(result.run_dir, "ticks")
    assert max(t["receive_rate"] for t in ticks if 6 <= t["elapsed_s"] < 9) == 0
    assert min(t["receive_rate"] for t in ticks if 11 <= t["elapsed_s"] < 14) > 0


@pytest.fixture(scope="module")
def linked_own(state_root):
    topology = linked_topology("linked2", 12210, runs_on="own")
    with local_cluster(topology, state_root) as provisioner:
        yield provisioner


def test_a_link_of_its_own_has_its_own_row_in_the_split(linked_own, tmp_path):
    spec = pairs("it-linked-own", "6s")
    result = Controller(spec, linked_own.topology, tmp_path, live=False,
                        keep_topology=True).run()
    assert result.outcome == "completed" and result.accounting.balanced, result.accounting
    manifest = read_manifest(result.run_dir)
    a, b, own = (m.name for m in linked_own.status())
    assert own.startswith("surge-linked2-link-0@")
    assert manifest.link.sides == [[a], [b]] and manifest.link.runs_in == own
    assert set(manifest.link.shovels.values()) == {"running"}
    split = document_table("004-split", [result.run_dir])
    assert [row[0] for row in split.rows] == [
        f"broker A: member {a}", f"broker B: member {b}", f"link (shovels, own member): member "
        f"{own}", "agent 0 (requesters)", "agent 1 (responders)", "total"]
    parts = [float(row[1].replace(",", "")) for row in split.rows]
    assert all(p > 0 for p in parts) and sum(parts[:-1]) == pytest.approx(parts[-1], rel=0.01)
    assert any("a member of its own" in note for note in split.notes)
