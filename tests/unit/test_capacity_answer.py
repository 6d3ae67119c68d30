"""The capacity answer: the table with the provisioned cluster's cost per 1,000 msg/s per month,
the fit and its projections (or why they are withheld), and the files it is written to."""

import json

import pytest

from results.capacity import Search, answer, as_markdown, reanswer, write
from results.usl import Law

SLO = {"p99": 0.05, "backlog": 1000, "loss": 0, "shortfall": 0.05}
LAW = Law(5000, 0.02, 0.001)


def searches(counts=(1, 2, 3, 4), repeats=2):
    out = []
    for r in range(repeats):
        for n in counts:
            rate = LAW.rate(n) * (1 + (0.01 if r else -0.01))
            out.append(Search(
                members=n, run_dir=f"runs/{n}-{r}", rate=rate, converged=True, why="held",
                p50_ms=2.0, p99_ms=20.0, broker_cores=0.24 * n, quota_cores=0.25 * n,
                generator_cores=0.8, monthly=n * 0.25 * 0.0425 * 730,
                probes=[{"rate": rate, "achieved": rate, "p99_ms": 20.0, "held": True},
                        {"rate": 2 * rate, "achieved": 1.1 * rate, "p99_ms": 900.0,
                         "held": False}]))
    return out


def test_the_answer_prices_the_provisioned_cluster_and_projects_with_an_interval(tmp_path):
    document = answer(searches(), target=LAW.rate(6), project=[12])
    one = document["searches"][0]
    assert one["per_thousand"] == one["monthly"] / (one["rate"] / 1000)
    assert document["fit"]["unreliable"] == []
    projection = document["projections"][0]
    assert projection["low"] <= LAW.rate(12) * 1.05 and projection["high"] >= LAW.rate(12) * 0.95
    assert 5 <= document["needed"]["value"] <= 7
    assert document["cheapest"] is None  # no measured size carried 6 members' rate
    text = as_markdown(document, SLO)
    assert "| 1 | 4,950 | 2.0 | 20.0 | 0.24 / 0.25 | 0.80 | 7.76 USD |" in text
    assert "At 12 members, the fit projects" in text and "you need" in text
    written = write(tmp_path, document, SLO)
    assert [p.name for p in written] == ["capacity.json", "report.md", "capacity.png"]
    assert (tmp_path / "capacity.png").stat().st_size > 10_000


def test_an_unreliable_fit_prints_why_instead_of_a_number():
    document = answer(searches(counts=(1, 2), repeats=1), target=20_000, project=[12])
    text = as_markdown(document, SLO)
    assert "At 12 members: not projected (too few points: 2 member count(s)" in text
    assert "To carry 20,000 msg/s within the SLO: not projected" in text
    assert document["projections"][0]["value"] is None


def test_the_cheapest_measured_size_that_carried_the_target_is_named():
    document = answer(searches(), target=LAW.rate(3) * 0.97, project=[8])
    assert document["cheapest"]["members"] == 3
    assert "Cheapest measured size that sustained it: 3 members" in as_markdown(document, SLO)


def test_the_answer_is_given_again_from_a_capacity_directory(tmp_path):
    write(tmp_path, answer(searches(), target=None, project=[8]), SLO)
    document, slo = reanswer(tmp_path, project=[5, 6], target=LAW.rate(5))
    assert slo == SLO and [p["members"] for p in document["projections"]] == [5, 6]
    assert document["needed"]["value"] in (5, 6)
    recorded = json.loads((tmp_path / "capacity.json").read_text())
    assert [p["members"] for p in recorded["projections"]] == [5, 6]
    assert len(recorded["searches"]) == 8
    (tmp_path / "capacity.json").write_text('{"searches": [{"members": 1}]}')
    with pytest.raises(ValueError, match="capacity.json: not a capacity answer"):
        reanswer(tmp_path, project=[5], target=None)


def test_the_knee_of_each_search_says_what_saturated():
    found = searches(counts=(1, 2), repeats=1)
    found[0].probes[1]["bottleneck"] = "member m-0 at its CPU quota (24% of 25%)"
    found[0].probes.append({"rate": 4 * found[0].rate, "achieved": 1.0, "p99_ms": 1.0,
                            "held": False, "bottleneck": "receivers behind"})  # not the knee
    text = as_markdown(answer(found, target=None, project=[]), SLO)
    assert (f"- 1 members: at the knee ({2 * found[0].rate:,.0f} msg/s asked, broke) member "
            "m-0 at its CPU quota (24% of 25%)") in text
    assert "- 2 members:" not in text  # recorded before probes named what saturated
