"""Benchmarks keep what they printed (bench/record.py): the output, headed by the command, the
time, the machine and the commit; a run that fails says so in a file of its own and leaves the
last completed record as it was."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# bench/ is not an installed package: load the module from the checkout
_SPEC = importlib.util.spec_from_file_location(
    "bench_record", Path(__file__).resolve().parents[2] / "bench" / "record.py")
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
recorded = _MODULE.recorded


def test_what_a_benchmark_prints_is_kept_with_its_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench/generators.py", "--rounds", "3"])
    with recorded("generators", tmp_path):
        print("| case | surge |")
        print("| 1+1 | 32,470 |")
    kept = (tmp_path / "generators.txt").read_text()
    assert kept.startswith("# command: python bench/generators.py --rounds 3\n# at: ")
    assert kept.endswith("| case | surge |\n| 1+1 | 32,470 |\n")
    assert "| 1+1 | 32,470 |" in capsys.readouterr().out  # and the terminal still shows it


def test_a_failed_benchmark_keeps_what_it_printed_apart_and_says_so(tmp_path):
    (tmp_path / "broken.txt").write_text("the last completed run\n")
    with pytest.raises(RuntimeError), recorded("broken", tmp_path):
        print("half a table")
        raise RuntimeError("broker gone")
    kept = (tmp_path / "broken.unfinished.txt").read_text()
    assert "half a table\n" in kept and kept.endswith("# ended: not completed\n")
    assert (tmp_path / "broken.txt").read_text() == "the last completed run\n"
    assert sys.stdout is sys.__stdout__ or not hasattr(sys.stdout, "copy")


@pytest.mark.parametrize("code", [0, 2])
def test_help_or_a_usage_error_writes_no_record(tmp_path, code):
    with pytest.raises(SystemExit), recorded("generators", tmp_path):
        print("usage: generators.py [-h]")
        raise SystemExit(code)
    assert list(tmp_path.iterdir()) == []
