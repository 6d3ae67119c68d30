"""What a command loads before it does anything: ``surge`` itself, ``surge run`` up to its first
publish, and a local agent up to its first line. Each is imported in a fresh interpreter and
its ``sys.modules`` read, since this process has loaded everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARROW = ("pyarrow", "numpy")


def loaded(*modules: str, then: str = "") -> set[str]:
    """The modules a fresh interpreter holds after importing ``modules`` (and running
    ``then``)."""
    code = f"import json, sys; import {', '.join(modules)}; {then or 'pass'}; " \
           "print(json.dumps(list(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=60)
    return set(json.loads(done.stdout))


def held(found: set[str], *packages: str) -> list[str]:
    """The modules of ``packages`` among ``found``."""
    return sorted(m for m in found if m.split(".")[0] in packages or m in packages)


def test_the_command_line_loads_no_arrow_no_spec_models_and_no_examples():
    found = loaded("orchestrator.cli")
    assert held(found, *ARROW, "pydantic", "pika", "rich") == []
    assert not {"orchestrator.examples", "orchestrator.specs.schema",
                "orchestrator.specs.campaign", "orchestrator.run.controller"} & found


def test_a_run_loads_no_arrow_and_no_analysis_before_its_load_starts():
    found = loaded("orchestrator.cli", "orchestrator.run.entry")
    assert held(found, *ARROW, "pyspark", "matplotlib") == []
    assert not {"results.passes", "results.analysis", "results.lake", "results.compare",
                "orchestrator.examples", "orchestrator.specs.campaign"} & found
    assert "topologies.rabbitmq.local" not in found  # its provisioner is loaded by placement


def test_the_run_directory_loads_arrow_only_to_write_or_read_parquet():
    assert held(loaded("results.rundir.tables", "results.rundir.manifest"), *ARROW) == []
    assert {"pyarrow", "pyarrow.parquet"} <= loaded(
        "results.rundir.tables", then="results.rundir.tables.load_arrow()")


def test_an_agent_loads_neither_the_command_line_nor_prometheus_nor_its_driver_to_start():
    found = loaded("drivers.agent")
    assert held(found, "typer", "click", "orchestrator", "prometheus_client", "pika",
                "pydantic", *ARROW) == []


@pytest.mark.parametrize("table", ["ticks", "members", "hosts", "agents"])
def test_the_lazy_schemas_are_the_columns_declared(table):
    from results.rundir.tables import COLUMNS, SCHEMAS, schemas
    assert SCHEMAS is schemas()
    assert [(f.name, str(f.type)) for f in SCHEMAS[table]] == \
        [(c.name, str(c.type)) for c in COLUMNS[table]]


def test_arrow_types_read_as_arrow_spells_them():
    from results.rundir.tables import BOOL, FLOAT64, INT32, STRING, ArrowType
    assert [str(t) for t in (FLOAT64, INT32, BOOL, STRING, ArrowType("int64", listed=True))] \
        == ["double", "int32", "bool", "string", "list<item: int64>"]


def test_the_agent_entry_wants_a_token():
    env = {k: v for k, v in os.environ.items() if k != "SURGE_AGENT_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "drivers.agent", "--max-lifetime", "5"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert "SURGE_AGENT_TOKEN is not set" in done.stderr


def test_layers_are_loaded_with_the_collector_paused_then_frozen():
    import gc

    from orchestrator.loading import loading
    assert gc.isenabled()
    try:
        with loading():
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        gc.disable()
        with loading():
            pass
        assert not gc.isenabled()  # as it was
    finally:
        gc.enable()
        gc.unfreeze()
