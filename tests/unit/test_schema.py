"""The JSON Schemas of the spec files (``surge schema``): generated from the spec models, shipped
as the examples' first lines name them, and in agreement with ``surge validate`` on the shipped
specs and the bad-spec corpus wherever a schema can tell at all."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import SurgeError
from orchestrator.specs.kinds import load_any
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.schema import MODELS, file_name, schema_of, schema_text

REPO = Path(__file__).resolve().parents[2]
BAD = Path(__file__).parent / "bad_specs"
SHIPPED = {"scenarios": "scenario", "topologies": "topology", "campaigns": "campaign"}

# Bad files whose mistake a schema of one file cannot see, and why; the schema passes them and
# `surge validate` refuses them. Every other bad file that parses as a YAML mapping is refused
# by both. (Files YAML cannot read as a mapping are refused by `surge validate` and by the YAML
# language server before any schema.)
SCHEMA_CANNOT_TELL = {
    "duplicate_keys.yaml": "a YAML reader keeps one of two equal keys; surge's loader refuses",
    # between fields, or over a whole plan (orchestrator/specs/limits.py)
    "campaign_cross_field.yaml": "a key both in set and in matrix",
    "capacity_overflow.yaml": "the bounds of a number with units are surge validate's",
    "rate_overflow.yaml": "a rate summed over a plan's increments",
    "rate_increments_overflow.yaml": "a rate summed over a plan's increments",
    "campaign_price.yaml": "the bounds of a number written as text are surge validate's",
    "huge_sweep.yaml": "the phases a plan expands to",
    "plan_too_long.yaml": "the length of a whole plan",
    "spike_factor.yaml": "a spike factor against the rates of the plan",
    "nested_cross_field.yaml": "a queue's count against its name",
    "several_cross_field.yaml": "fields against each other",
    "topology_link_channel.yaml": "queue names against queue manager names",
    "scenario_unserved_pairs.yaml": "the responders started against the topology's queues",
    "message_memory.yaml": "message size times senders against this machine's memory",
    "topology_cross_field.yaml": "fields against each other",
    "topology_cpu_overflow.yaml": "cores times members",
    "topology_agents_not_forwarded.yaml": "a value refused by a check of its own",
    "campaign_bad_keys.yaml": "the form of override paths (keys of set and matrix)",
    "capacity_members.yaml": "member counts against the topology's",
    "topology_link.yaml": "a link's sides against the members, and the queues a shovel takes",
    # what the files a spec names hold
    "campaign_cells_fail.yaml": "the scenarios a campaign names and their fields' values",
    "campaign_value_bomb.yaml": "the scenario a campaign's values are set in",
    "huge_matrix.yaml": "cells counted over the matrix and repetitions",
    "repetitions_times_matrix.yaml": "cells counted over the matrix and repetitions",
    "scenario_cross_with_topology.yaml": "the scenario against its topology",
    "scenario_linked_scaling.yaml": "the scenario against its topology",
    "topology_is_binary.yaml": "the topology file's content",
    "topology_is_itself.yaml": "the topology file's content",
    "topology_path_directory.yaml": "whether the topology path is a file",
    "topology_path_missing.yaml": "whether the topology file exists",
    "topology_path_nul.yaml": "the topology path as the system sees it",
    "topology_path_too_long.yaml": "the topology path as the system sees it",
}


def _kind(document: dict) -> str:
    """The kind as ``surge validate`` decides it (orchestrator/specs/kinds.py)."""
    return "campaign" if "cells" in document else \
        "scenario" if "plan" in document or "workload" in document else "topology"


def _schema_errors(document: dict, kind: str) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema_of(kind))
    return [error.message for error in validator.iter_errors(document)]


def _shipped() -> list[tuple[Path, str]]:
    return [(path, kind) for folder, kind in SHIPPED.items()
            for path in sorted((REPO / folder).glob("*.yaml"))]


def test_every_schema_is_a_valid_json_schema_of_its_model():
    for kind in MODELS:
        jsonschema.Draft202012Validator.check_schema(schema_of(kind))
        assert schema_of(kind)["title"] == MODELS[kind].__name__


def test_the_committed_schemas_are_what_the_models_give():
    for kind in MODELS:
        committed = REPO / "schemas" / file_name(kind)
        assert committed.read_text() == schema_text(kind), \
            f"{committed} is stale: run surge schema schemas"


def test_surge_schema_writes_them(tmp_path):
    result = CliRunner().invoke(app, ["schema", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    for kind in MODELS:
        assert (tmp_path / "s" / file_name(kind)).read_text() == schema_text(kind)
        assert str(tmp_path / "s" / file_name(kind)) in result.output


def test_every_shipped_spec_names_its_schema_and_validates_against_it():
    assert len(_shipped()) >= 20
    for path, kind in _shipped():
        first = path.read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema=../schemas/{file_name(kind)}", path
        assert (path.parent / "../schemas" / file_name(kind)).is_file()
        document = yaml.safe_load(path.read_text())
        assert _kind(document) == kind, path
        assert _schema_errors(document, kind) == [], path
        load_any(path)  # and surge validate agrees


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.name)
def test_the_schema_and_surge_validate_agree_on_the_bad_specs(path):
    try:
        document = yaml.safe_load(path.read_bytes())
    except (yaml.YAMLError, ValueError, RecursionError):
        document = None  # not YAML a schema could be applied to
    refused_by_validate = True
    try:
        load_any(path)
    except SurgeError:
        pass
    else:
        refused_by_validate = False
    if path.name.startswith("_"):  # the valid helpers the others name
        assert not refused_by_validate and _schema_errors(document, _kind(document)) == []
        return
    assert refused_by_validate
    if not isinstance(document, dict):
        assert path.name not in SCHEMA_CANNOT_TELL
        return
    errors = _schema_errors(document, _kind(document))
    if path.name in SCHEMA_CANNOT_TELL:
        assert errors == [], f"the schema now tells {path.name}: drop it from SCHEMA_CANNOT_TELL"
    else:
        assert errors, f"the schema passes {path.name}, which surge validate refuses"


def test_units_and_shorthands_are_taken_as_surge_validate_takes_them():
    scenario = {"name": "s", "topology": "t.yaml",
                "workload": {"queue": "q", "senders": 1, "receivers": 1,
                             "message": {"size": "2KiB"}},
                "plan": ["50:10s", {"rate_per_sender": "+50", "hold": 30},
                         {"rate_per_sender": 1e4, "hold": "1m"}],
                "consumer_profile": ["10ms:5s"], "slo": {"shortfall": "3%"}}
    assert _schema_errors(scenario, "scenario") == []
    ScenarioSpec.model_validate(scenario)  # the model takes the same
    scenario["workload"]["message"]["size"] = "two KiB"
    scenario["name"] = "../up"
    assert len(_schema_errors(scenario, "scenario")) == 2
    with pytest.raises(ValidationError) as refused:
        ScenarioSpec.model_validate(scenario)
    assert refused.value.error_count() == 2
