"""Campaign cells that are capacity searches: judged on the search (its broken probes are how
it searched), ranked by the provisioned cluster's price per 1,000 msg/s sustained, and the
cheapest cell that sustained the target named."""

from datetime import datetime, timezone
from pathlib import Path

from orchestrator.campaign.ranking import capacity_text
from orchestrator.campaign.records import CellRecord
from orchestrator.campaign.requirement import judge
from orchestrator.specs.campaign import Requirement, load_campaign
from results.rundir.manifest import (
    Accounting,
    CapacityRecord,
    ProbeRecord,
    RunManifest,
    read_manifest,
)

CAMPAIGN = Path(__file__).resolve().parents[2] / "campaigns" / "capacity-sizes.yaml"


def searched(campaign, cell, rate, converged=True, lost=0, condition="ideal") -> RunManifest:
    scenario, topology = campaign.specs[cell.id]
    probes = [ProbeRecord(step=1, rate=rate or 1000, held=bool(rate)),
              ProbeRecord(step=2, rate=2 * (rate or 1000), held=False, reasons=["p99"])]
    return RunManifest(
        run_id=cell.id, started_at=datetime(2026, 11, 23, tzinfo=timezone.utc),
        outcome="completed", scenario=scenario.model_dump(mode="json"),
        topology=topology.model_dump(mode="json"),
        accounting=Accounting(sent=10, received=10 - lost, lost=lost, duplicates=0,
                              unexplained=0, balanced=not lost, explain=""),
        capacity=CapacityRecord(members=topology.start, slo=scenario.slo.model_dump(),
                                probes=probes, rate=rate, converged=converged, why="held",
                                condition=condition))


def done(root, records):
    return [(r.cell, read_manifest(root / r.cell.id)) for r in records]


def test_capacity_cells_are_judged_on_the_search_and_ranked_by_provisioned_price(tmp_path):
    campaign = load_campaign(CAMPAIGN)
    cells = campaign.cells[:4]
    rates = [4000, 9000, None, 7000]
    records = []
    for cell, rate in zip(cells, rates, strict=True):
        manifest = searched(campaign, cell, rate)
        (tmp_path / cell.id).mkdir()
        manifest.write(tmp_path / cell.id)
        verdict = judge(Requirement(lossless=True), manifest)
        assert verdict.passed == bool(rate), verdict
        records.append(CellRecord(cell, "done", verdict.passed, verdict.reason))
    assert "sustains 4,000 msg/s at 1 members within the SLO (2 probes)" in records[0].reason
    assert judge(Requirement(), searched(campaign, cells[0], 4000, lost=2)).passed is False
    text = capacity_text(campaign, done(tmp_path, records))
    lines = text.splitlines()
    order = [next(c.id for c in cells if line.strip().startswith(c.id)) for line in lines[2:6]]
    prices = {c.id: campaign.specs[c.id][0].capacity.price.monthly(
        campaign.specs[c.id][1].start, campaign.specs[c.id][1].cpu_per_member) for c in cells}
    per_thousand = {c.id: prices[c.id] / (r / 1000) for c, r in zip(cells, rates) if r}
    assert order[:3] == sorted(per_thousand, key=per_thousand.get)
    assert order[3] == cells[2].id and "none held" in lines[5]
    meeting = [c.id for c, r in zip(cells, rates) if r and r >= 6000]
    cheapest = min(meeting, key=prices.get)
    assert lines[-1] == (f"cheapest cell that sustained 6,000 msg/s: {cheapest} "
                         f"({prices[cheapest]:,.2f} per month)")


def test_capacity_cells_of_an_adverse_condition_rank_after_the_ideal_ones(tmp_path):
    campaign = load_campaign(CAMPAIGN)
    cells = campaign.cells[:3]
    records = []
    for cell, rate, condition in zip(cells, [4000, 500, 9000],
                                     ["member-down", "ideal", "ideal"], strict=True):
        (tmp_path / cell.id).mkdir()
        searched(campaign, cell, rate, condition=condition).write(tmp_path / cell.id)
        records.append(CellRecord(cell, "done", True, "held"))
    lines = capacity_text(campaign, done(tmp_path, records)).splitlines()
    assert lines[0].startswith("capacity cells, ideal first and then each condition")
    assert lines[1].split()[:5] == ["cell", "condition", "members", "priced", "as"]
    rows = [line.split() for line in lines[2:5]]
    assert [row[1] for row in rows] == ["ideal", "ideal", "member-down"]
    assert rows[2][0] == cells[0].id and "its cores" in lines[4]


RANKING = Path(__file__).resolve().parents[2] / "campaigns" / "capacity-001-ranking.yaml"


def test_document_001s_ranking_marks_the_sizes_that_pass_every_condition(tmp_path):
    campaign = load_campaign(RANKING)
    conditions = {cell.id: campaign.specs[cell.id][0].capacity.searched_under[0].name
                  for cell in campaign.cells}
    assert set(conditions.values()) == {"ideal", "member-down", "consumer-slowdown"}
    target = campaign.specs[campaign.cells[0].id][0].capacity.target
    # every size carries the target ideally; one size falls short with a member down
    short = next(c for c in campaign.cells if conditions[c.id] == "member-down")
    records = []
    for cell in campaign.cells:
        (tmp_path / cell.id).mkdir()
        rate = target / 2 if cell is short else target * 1.5
        searched(campaign, cell, rate, condition=conditions[cell.id]).write(tmp_path / cell.id)
        records.append(CellRecord(cell, "done", True, "held"))
    lines = capacity_text(campaign, done(tmp_path, records)).splitlines()
    assert lines[1].split()[-2:] == ["passes", "all"]
    rows = {line.split()[0]: line.split() for line in lines[2:2 + len(campaign.cells)]}
    same_size = [c.id for c in campaign.cells if c.group == short.group
                 and c.params[:-1] == short.params[:-1]]
    assert len(same_size) == 3 and all(rows[c][-1] == "no" for c in same_size)
    assert sum(row[-1] == "yes" for row in rows.values()) == len(campaign.cells) - 3
    assert [row[1] for row in rows.values()] == sorted(
        (row[1] for row in rows.values()), key=["ideal", "member-down",
                                                "consumer-slowdown"].index)
    assert lines[-1].startswith("cheapest size that passes all (its target under every "
                                "condition): ")
    assert short.id not in lines[-1]
