"""The layers of README's "Architecture" hold: import-linter's contracts in pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is part of the dev extra"
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
