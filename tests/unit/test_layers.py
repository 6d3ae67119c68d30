"""The layers of docs/architecture.md hold: import-linter's contracts in pyproject.toml."""

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


def test_no_module_imports_itself_in_a_circle():
    import grimp

    graph = grimp.build_graph("orchestrator", "drivers", "topologies", "results")
    circles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert circles == []


def _strongly_connected(graph) -> list[list[str]]:
    """Tarjan's components of the import graph (type-checking imports included)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            components.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return components
