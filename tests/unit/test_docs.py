"""The documentation: the reference pages are what the code gives now, every spec field has a
description, and the site builds with MkDocs in strict mode (broken links and anchors fail)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import docs
from orchestrator.run.exposition import COUNTERS, GAUGES, MEMBER_GAUGES
from results.rundir.tables import COLUMNS, SCHEMAS

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_current():
    assert docs.stale(REPO) == [], "stale reference: run python -m orchestrator.docs"


def test_every_spec_field_has_a_description():
    assert len(docs.spec_models()) >= 30
    assert docs.undescribed_fields() == []


def test_the_reference_holds_every_command_field_metric_and_column():
    pages = docs.render()
    for name in ("run", "validate", "capacity", "campaign", "schema", "examples", "analyze"):
        assert f"## surge {name}\n" in pages["cli.md"], name
    assert "## surge agent\n" not in pages["cli.md"]  # hidden
    for model in docs.spec_models():
        assert f"## {model.__name__}\n" in pages["specs.md"]
        for name, info in model.model_fields.items():
            assert f"| `{info.alias or name}` |" in pages["specs.md"], (model, name)
    for name in [*GAUGES, *COUNTERS, *MEMBER_GAUGES, "surge_latency_seconds",
                 "surge_agent_sent", "surge_agent_latency_seconds"]:
        assert f"| `{name}` |" in pages["metrics.md"], name
    for table, schema in SCHEMAS.items():
        assert f"## {table}\n" in pages["tables.md"]
        assert all(f"| `{column}` |" in pages["tables.md"] for column in schema.names)


def test_an_undescribed_field_is_found(monkeypatch):
    from orchestrator.specs.topology import QueueSpec
    monkeypatch.setattr(QueueSpec.model_fields["durable"], "description", None)
    assert docs.undescribed_fields() == ["QueueSpec.durable"]


def test_every_column_has_a_description_and_the_reference_shows_it():
    assert sum(len(schema) for schema in SCHEMAS.values()) >= 70
    assert docs.undescribed_columns() == []
    page = docs.render()["tables.md"]
    for table, columns in COLUMNS.items():
        assert [c.name for c in columns] == SCHEMAS[table].names
        for column in columns:
            assert f"| `{column.name}` | `{column.type}` | {docs._cell(column.description)} |" \
                in page, (table, column.name)


def test_an_undescribed_column_is_found(monkeypatch):
    ticks = list(COLUMNS["ticks"])
    ticks[3] = ticks[3]._replace(description=" ")
    monkeypatch.setitem(COLUMNS, "ticks", ticks)
    assert docs.undescribed_columns() == [f"ticks.{ticks[3].name}"]


def _mkdocs_missing() -> str | None:
    for module in ("mkdocs", "material"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed here (make deps installs the dev extra)"
    return None


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.mark.skipif(_mkdocs_missing() is not None, reason=str(_mkdocs_missing()))
def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path):
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "reference" / "specs" / "index.html").is_file()
    # the same site with one link to an anchor that does not exist
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copytree(REPO / "bench" / "results", tmp_path / "bench" / "results")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[gone](guide/scenarios.md#no-such-section)\n")
    broken = _build(tmp_path / "mkdocs.yml", tmp_path / "site2")
    assert broken.returncode != 0 and "no-such-section" in broken.stderr


def test_every_benchmark_figure_in_the_docs_is_a_file_a_benchmark_wrote():
    """Each benchmark ``make bench`` runs has its committed results file included in the docs
    (never a copy), and every included file exists, names its command and completed."""
    makefile = (REPO / "Makefile").read_text()
    target = makefile[makefile.index("\nbench:"):makefile.index("\nbench-deps:")]
    run = set(re.findall(r"bench/(\w+)\.py", target))
    recorded = {path.stem for path in (REPO / "bench").glob("*.py")
                if 'recorded("' in path.read_text()}
    included = {m.group(1) for path in (REPO / "docs").rglob("*.md")
                for m in re.finditer(r'--8<-- "bench/results/(\w+)\.txt"', path.read_text())}
    assert len(run) >= 12 and run <= recorded, run - recorded
    assert run <= included, run - included
    for name in included:
        text = (REPO / "bench" / "results" / f"{name}.txt").read_text()
        assert text.startswith("# command: python bench/"), name
        assert "# ended: not completed" not in text, name
