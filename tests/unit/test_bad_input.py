"""Bad input never gives a traceback, a hang or a half-read file: ``surge validate`` on every file
of ``bad_specs/`` (each says what it tries, and the lines it must get) and on paths made here (a
directory, a pipe, an unreadable, huge or UTF-16 file) exits 2 within seconds, with one line per
problem naming the file; ``--set`` values are read as safely as files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import SpecError
from orchestrator.specs.loader import load_scenario, load_topology
from orchestrator.specs.yamlsafe import MAX_FILE_BYTES
from results.rundir.runid import new_run_id

CORPUS = Path(__file__).parent / "bad_specs"
BAD = sorted(p for p in CORPUS.glob("*.yaml") if not p.name.startswith("_"))
SECONDS = 5.0


def validate(*args: str | Path) -> tuple[int, list[str]]:
    """``surge validate ARGS``: exit status and stderr lines; fails on a traceback or if slow."""
    started = time.monotonic()
    result = CliRunner().invoke(app, ["validate", *map(str, args)])
    assert time.monotonic() - started < SECONDS, "took too long"
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{type(result.exception).__name__}: {result.exception}"
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr.splitlines()


def expected(path: Path) -> list[str]:
    """The ``# expect:`` lines of a corpus file (any bytes: some files are not text)."""
    text = path.read_bytes().decode("latin-1")
    return [line.removeprefix("# expect:").strip() for line in text.splitlines()
            if line.startswith("# expect:")]


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_every_bad_file_gets_one_line_per_problem(path: Path):
    code, lines = validate(path)
    assert code == 2
    wanted = expected(path)
    assert wanted, "a corpus file says what surge validate must print"
    assert len(lines) == len(wanted), "\n".join(lines)
    for line, want in zip(lines, wanted, strict=True):
        assert line.startswith(f"{CORPUS}/"), line
        assert want in line.removeprefix(str(path)), f"{line!r} lacks {want!r}"


def test_the_real_command_on_the_whole_corpus_at_once():
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", *map(str, BAD)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and not result.stdout
    assert len(result.stderr.splitlines()) == sum(len(expected(p)) for p in BAD)
    assert time.monotonic() - started < 30


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _chmod_000(path: Path) -> Path:
    path.write_text("name: locked\n")
    path.chmod(0)
    return path


MADE = {  # name -> (make the path in a directory, what the one line says)
    "directory": (lambda d: (d / "dir.yaml").mkdir() or d / "dir.yaml",
                  "cannot read file: a directory, not a file"),
    "missing": (lambda d: d / "absent.yaml", "cannot read file: file not found"),
    "pipe": (lambda d: _fifo(d / "pipe.yaml"),
             "cannot read file: not a regular file (a device, pipe or socket)"),
    "device": (lambda d: Path("/dev/zero"),
               "cannot read file: not a regular file (a device, pipe or socket)"),
    "too big": (lambda d: (d / "big.yaml").write_text("#" * MAX_FILE_BYTES + "\n") and
                d / "big.yaml", f"bytes; at most {MAX_FILE_BYTES:,} are read"),
    "utf-16": (lambda d: (d / "u16.yaml").write_bytes("name: x\n".encode("utf-16")) and
               d / "u16.yaml", ":1: not UTF-8 text: byte 0xff at column 1"),
    "under a file": (lambda d: (d / "f").write_text("") or d / "f" / "x.yaml",
                     "cannot read file: not a directory"),
    "symlink loop": (lambda d: (d / "loop.yaml").symlink_to("loop.yaml") or d / "loop.yaml",
                     "cannot read file: too many levels of symbolic links"),
    "sweep of 10^8": (lambda d: (d / "t.yaml").write_text("name: t\nqueues: [{name: q}]\n") and
                      (d / "s.yaml").write_text(
                          "name: s\ntopology: t.yaml\nworkload: {queue: q, senders: 1, "
                          "receivers: 1}\nplan:\n  - rate_per_sender: 1\n    hold: 1s\n"
                          "    repeat: 10000\n    senders: [" + "1, " * 9999 + "1]\n") and
                      d / "s.yaml", ":5: plan.0: the plan comes to more than 100,000 steps"),
}


@pytest.mark.parametrize("name", MADE)
def test_paths_that_are_not_readable_spec_files(tmp_path: Path, name: str):
    make, message = MADE[name]
    path = make(tmp_path)
    code, lines = validate(path)
    assert code == 2
    (line,) = lines
    assert line.startswith(str(path)) and message in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file(tmp_path: Path):
    code, (line,) = validate(_chmod_000(tmp_path / "locked.yaml"))
    assert code == 2 and "cannot read file: permission denied" in line


def test_every_file_of_a_command_line_is_checked(tmp_path: Path):
    code, lines = validate(CORPUS / "binary.yaml", CORPUS / "_topology.yaml",
                           tmp_path / "absent.yaml")
    assert code == 2 and len(lines) == 2
    assert "binary.yaml:2: not UTF-8" in lines[0] and "absent.yaml: cannot read" in lines[1]


# -- --set values ---------------------------------------------------------------------------

SCENARIO = CORPUS / "_scenario.yaml"


@pytest.mark.parametrize(("override", "message"), [
    ("workload.senders=[1", "workload.senders: --set value '[1' cannot be read: not valid YAML"),
    ("workload.senders={a: 1", "cannot be read: not valid YAML"),
    ("workload.senders=!!python/object/apply:os.system [id]",
     "could not determine a constructor for the tag"),
    ("workload.senders=!!int many", "cannot read 'many' as int"),
    ("workload.senders=*nowhere", "found undefined alias 'nowhere'"),
    ("workload.senders=&a [*a]", "alias *a is used inside the value it names"),
    ("workload={a: 1, a: 2}", "key 'a' repeats the one on line 1"),
    ("workload.senders=1\n---\n2", "expected a single document"),
    ("workload.senders=" + "[" * 500, "nested more than 100 levels deep"),
    ("workload.senders=" + "9" * 200, "a number of 200 characters"),
    ("workload.senders=\x07", "is not allowed in YAML"),
    ("workload.senders=true", "workload.senders: Input should be a valid integer (got True)"),
    ("plan.0.rate_per_sender=.nan", "plan.0.rate_per_sender: expected msg/s as a finite number"),
    ("plan.0.hold=.inf", "plan.0.hold: expected a finite duration"),
    ("name=../../tmp/x", "name: a name becomes part of a directory name"),
    ("name=a\nb", "name: a name becomes part of a directory name"),
    ("=5", "an override must look like field.path=value"),
    ("workload.senders", "an override must look like field.path=value"),
    ("plan.9.hold=1s", "plan.9: --set path does not exist"),
    ("plan.\u00b2.hold=1s", "plan.\u00b2: --set path does not exist"),
    ("plan." + "9" * 5000 + ".hold=1s", "--set path does not exist"),
])
def test_malformed_set_values_are_one_line_each(override: str, message: str):
    with pytest.raises(SpecError) as caught:
        load_scenario(SCENARIO, [override])
    (line,) = str(caught.value).splitlines()
    assert line.startswith(str(SCENARIO)) and message in line, line


def test_validate_takes_set_like_run():
    code, lines = validate(SCENARIO, "--set", "workload.senders=[1")
    assert code == 2 and len(lines) == 1 and "workload.senders: --set value" in lines[0]
    assert validate(SCENARIO, "--set", "workload.senders=8", "--set",
                    "topology.members=5") == (0, [])
    code, (line,) = validate(SCENARIO, "--set", "topology.members=true")
    assert code == 2 and "_topology.yaml" in line and "members: Input should be a valid integer" \
        in line
    campaign = CORPUS.parents[2] / "campaigns" / "zos-queue-pairs.yaml"
    assert validate(campaign, "--set", "plan.0.hold=3s")[0] == 0  # every cell takes it
    code, (line,) = validate(campaign, "--set", "workload.message.size=2KiB")
    assert code == 2 and line == f"{campaign}: --set workload.message.size: cells.0.matrix " \
                                 f"varies it; a --set would make those cells alike (change " \
                                 f"the campaign instead)"


# -- what is read stays whole -----------------------------------------------------------------

def test_a_topology_behind_a_symlink_loop_is_named_at_its_line(tmp_path: Path):
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    (tmp_path / "s.yaml").write_text(SCENARIO.read_text().replace("_topology.yaml", "loop.yaml"))
    code, (line,) = validate(tmp_path / "s.yaml")
    assert code == 2 and ":3: topology: too many levels of symbolic links" in line


def test_an_alias_is_a_copy_a_set_changes_one_of(tmp_path: Path):
    (tmp_path / "t.yaml").write_text("name: t\nqueues: [{name: q}]\n")
    (tmp_path / "s.yaml").write_text(
        "\ufeffname: s\ntopology: t.yaml\nworkload: {queue: q, senders: 2, receivers: 2}\n"
        "plan:\n  - &step {rate_per_sender: 50, hold: 10s}\n  - *step\n"
        "  - {<<: *step, hold: 20s}\n")  # with a BOM and a merge key, both fine
    scenario, _ = load_scenario(tmp_path / "s.yaml", ["plan.0.hold=5s"])
    assert [step.hold for step in scenario.plan] == [5, 10, 20]


def test_a_problem_inside_an_alias_is_at_a_line_of_the_file(tmp_path: Path):
    (tmp_path / "t.yaml").write_text("name: t\nqueues: &q [{name: q, count: 2}]\nhosts: []\n")
    with pytest.raises(SpecError) as caught:
        load_topology(tmp_path / "t.yaml")
    assert str(caught.value).startswith(f"{tmp_path / 't.yaml'}:2: queues.0.count: a queue "
                                        "name with %d needs")


def test_a_run_directory_name_stays_inside_the_runs_directory():
    for name in ("../../etc", "a/b", "x\ny", "", "." * 3, "n" * 300):
        run_id = new_run_id(name)
        assert "/" not in run_id and "\n" not in run_id and run_id not in (".", "..")
        assert len(run_id) <= 17 + 64


# -- run.json and analysis.json ---------------------------------------------------------------

@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe{}", "run.json: not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"steps": [', "run.json:1: not valid JSON"),
    (b"[1, 2]", "run.json: expected a JSON object, got list"),
    (b"[" * 100_000, "run.json: JSON nested too deeply"),
    (b'{"steps": [{"target_rate": 1}]}', "run.json: not the run.json of a run"),
    (b'{"steps": 5}', "run.json: not the run.json of a run"),
])
def test_compare_names_a_damaged_run_json(tmp_path: Path, content: bytes, message: str):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_bytes(content)
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "run")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert message in line


def test_compare_names_a_run_json_that_is_a_directory(tmp_path: Path):
    (tmp_path / "run" / "run.json").mkdir(parents=True)
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "run.json: a directory, not a file" in result.stderr


def test_analysis_reports_a_damaged_run_json_as_one_line(tmp_path: Path):
    from orchestrator.errors import FileError
    from results.rundir.manifest import read_manifest
    (tmp_path / "run.json").write_text(json.dumps(["not", "an", "object"]))
    with pytest.raises(FileError, match=r"run.json: expected a JSON object, got list$"):
        read_manifest(tmp_path)
