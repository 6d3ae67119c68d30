"""JSON Schemas of the spec files, generated from the same models ``surge validate`` uses, for
editors: a spec file whose first line is ``# yaml-language-server: $schema=../schemas/
scenario.schema.json`` is checked as it is typed (the YAML language server, in VS Code, Vim,
Emacs and others).

A schema tells what each field takes and means; it cannot tell what needs the other fields or
the files a spec names (a plan's steps against the workload's senders, a fault against the
topology, the bounds of :mod:`orchestrator.specs.limits` over a whole plan). Fields with units
take a number or text such as ``2KiB``, ``30s`` or ``3%``; their bounds are ``surge
validate``'s to check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import FileError
from orchestrator.specs.campaign import CampaignSpec
from orchestrator.specs.capacity import CapacitySpec
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MODELS: dict[str, type[BaseModel]] = {
    "scenario": ScenarioSpec, "topology": TopologySpec, "campaign": CampaignSpec,
    "capacity": CapacitySpec}
"""Each kind of spec -> its model; ``capacity`` is a scenario's ``capacity`` section."""
FOLDER = "schemas"
"""Where the examples keep the schemas, next to ``scenarios/`` and the others."""


def file_name(kind: str) -> str:
    """The schema file of ``kind``: ``scenario.schema.json``."""
    return f"{kind}.schema.json"


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of spec ``kind`` (a key of :data:`MODELS`)."""
    found = MODELS[kind].model_json_schema(mode="validation")
    return {"$schema": DIALECT, "$id": file_name(kind), **found}


def schema_text(kind: str) -> str:
    """The schema of ``kind`` as the text of its file."""
    return json.dumps(schema_of(kind), indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Write every kind's schema into ``directory`` (made if missing); return the paths."""
    written = []
    for kind in MODELS:
        path = directory / file_name(kind)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(schema_text(kind))
        except OSError as error:
            raise FileError(f"{path}: cannot write: {error.strerror or error}") from None
        written.append(path)
    return written
