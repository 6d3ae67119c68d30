"""The Grafana dashboard holds together: the fields of Grafana's dashboard model it uses are
there and well-formed, panels do not overlap, every number has a unit, and every variable a
query uses is defined. (That every metric it queries exists is checked against real scrapes
in tests/integration/test_live_page.py.)"""

import json
import re
from importlib import resources

DASHBOARD = json.loads((resources.files("results") / "grafana" / "surge-dashboard.json")
                       .read_text())
PANEL_TYPES = {"timeseries", "stat"}


def queries(dashboard=DASHBOARD) -> list[str]:
    """Every PromQL expression of the dashboard: panels, annotations, variables."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]
              if v["type"] == "query"]
    return exprs


def metric_names(dashboard=DASHBOARD) -> set[str]:
    """The metric names the dashboard's queries read (all of surge's and RabbitMQ's)."""
    return {name for expr in queries(dashboard)
            for name in re.findall(r"\b((?:surge|rabbitmq)_[a-z0-9_]+)\b", expr)}


def test_the_dashboard_model_fields_it_uses_are_well_formed():
    assert isinstance(DASHBOARD["schemaVersion"], int) and DASHBOARD["schemaVersion"] >= 36
    assert DASHBOARD["uid"] and DASHBOARD["title"] and DASHBOARD["refresh"]
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in DASHBOARD["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["title"] and panel["description"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)) and all(t["expr"] for t in panel["targets"])
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]  # a unit on every number
        grid = panel["gridPos"]
        assert {"x", "y", "w", "h"} <= set(grid) and grid["x"] >= 0 and grid["x"] + grid["w"] <= 24


def test_panels_do_not_overlap():
    cells = {}
    for panel in DASHBOARD["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


def test_every_variable_used_is_defined():
    defined = {v["name"] for v in DASHBOARD["templating"]["list"]}
    used = {name for expr in queries() for name in re.findall(r"\$(\w+)", expr)}
    used |= {"datasource"}
    assert used - {"__rate_interval"} <= defined
    run = next(v for v in DASHBOARD["templating"]["list"] if v["name"] == "run_id")
    assert run["query"]["query"] == "label_values(surge_target_rate, run_id)"


def test_the_queries_read_surge_and_rabbitmq_metrics_with_the_run_label():
    names = metric_names()
    assert {"surge_agent_sent_total", "surge_agent_latency_seconds_bucket",
            "surge_member_cpu_percent", "rabbitmq_queue_messages"} <= names
    for expr in queries()[:-1]:  # the run variable's own query lists every run
        assert 'run_id=~"$run_id"' in expr, expr


def test_the_achieved_tile_reads_the_controllers_own_ratio_and_keeps_the_last():
    tile = next(p for p in DASHBOARD["panels"] if p["title"] == "Achieved end to end")
    assert tile["targets"][0]["expr"] == 'surge_achieved_ratio{run_id=~"$run_id"}'
    assert tile["options"]["reduceOptions"]["calcs"] == ["lastNotNull"]
