"""``surge examples DIR``: every shipped scenario, topology and campaign (and the schemas they
name), laid out as in the repository, and never over an existing file without --force."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import FileError
from orchestrator.examples import example_files, write_examples
from orchestrator.specs.kinds import load_any

REPO = Path(__file__).resolve().parents[2]


def repository_examples() -> set[Path]:
    return {path.relative_to(REPO) for folder in ("scenarios", "topologies", "campaigns")
            for path in (REPO / folder).glob("*.yaml")}


def repository_schemas() -> set[Path]:
    return {path.relative_to(REPO) for path in (REPO / "schemas").glob("*.schema.json")}


def test_the_examples_are_the_repository_folders():
    assert set(example_files()) == repository_examples()
    assert Path("scenarios/quickstart.yaml") in example_files()


def test_written_examples_keep_their_relative_paths_and_load(tmp_path):
    written = write_examples(tmp_path / "ex")
    assert {p.relative_to(tmp_path / "ex") for p in written} == \
        repository_examples() | repository_schemas()
    for name in repository_schemas():  # the schemas the examples' first lines name
        assert (tmp_path / "ex" / name).read_bytes() == (REPO / name).read_bytes()
    for name in ("scenarios/quickstart.yaml", "campaigns/cluster-balance.yaml"):
        load_any(tmp_path / "ex" / name, [])  # finds ../topologies and ../scenarios


def test_existing_files_are_kept_unless_forced(tmp_path):
    (tmp_path / "scenarios").mkdir()
    mine = tmp_path / "scenarios" / "quickstart.yaml"
    mine.write_text("mine\n")
    with pytest.raises(FileError, match=r"quickstart\.yaml already exist; --force"):
        write_examples(tmp_path)
    assert mine.read_text() == "mine\n" and not (tmp_path / "topologies").exists()
    write_examples(tmp_path, force=True)
    assert mine.read_bytes() == (REPO / "scenarios" / "quickstart.yaml").read_bytes()


def test_the_command_says_what_it_did_and_refuses_without_force(tmp_path):
    runner = CliRunner()
    first = runner.invoke(app, ["examples", str(tmp_path)])
    files = len(repository_examples() | repository_schemas())
    assert first.exit_code == 0 and f"wrote {files} files" in first.output
    again = runner.invoke(app, ["examples", str(tmp_path)])
    assert again.exit_code == 2 and "--force overwrites them" in again.output
    assert "Traceback" not in again.output
    assert runner.invoke(app, ["examples", str(tmp_path), "--force"]).exit_code == 0


def test_a_file_in_the_way_of_the_directory_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileError, match="not a directory"):
        write_examples(tmp_path / "file")
