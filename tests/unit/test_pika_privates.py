"""Only drivers/amqp/wire.py, the fast path's adapter, touches pika's private names: a new pika
that moves them breaks one module, checked by tests/unit/test_pika_hooks.py.

A private name is one pika defines with a leading underscore (a method, an attribute it sets, a
module-level name). Flagged outside the adapter: an attribute of that name read or set on
anything but ``self``, ``cls``, ``super()`` or a class of the same module (surge's own classes
do not subclass pika's), the
name as a string (``getattr(connection, "_transport")``), and its import from a pika module.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[2]
TREES = ("drivers", "orchestrator", "topologies", "results")
ADAPTER = ROOT / "drivers" / "amqp" / "wire.py"


@functools.cache
def pika_private_names() -> frozenset[str]:
    """Every single-underscore name pika's source defines."""
    names = set()
    for path in Path(pika.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return frozenset(n for n in names if n[:1] == "_" and n[1:2].isalpha())


def _own(node: ast.expr, classes: set[str]) -> bool:
    """``self``, ``cls``, ``super()`` or a class of the module: one of its own classes."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls") or node.id in classes
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "super"


def private_uses(source: str, where: str = "<source>") -> list[str]:
    """Each use of a pika private name in ``source``, as ``where:line: name``."""
    private = pika_private_names()
    found, tree = [], ast.parse(source, where)
    classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and node.attr in private \
                and not _own(node.value, classes):
            name = node.attr
        elif isinstance(node, ast.Constant) and node.value in private:
            name = node.value
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pika":
            name = next((a.name for a in node.names if a.name.startswith("_")), None)
        if name is not None:
            found.append(f"{where}:{node.lineno}: {name}")
    return found


def test_the_check_finds_what_it_looks_for():
    assert pika_private_names() >= {"_transport", "_on_data_available", "_adapter_emit_data",
                                    "_AsyncPlaintextTransport", "_MAX_RECV_BYTES"}
    assert private_uses('getattr(connection, "_transport", None)')
    assert private_uses("connection._on_data_available = feed")
    assert private_uses("size = link.connection._transport.get_write_buffer_size()")
    assert private_uses("from pika.adapters.utils.io_services_utils import "
                        "_AsyncPlaintextTransport")
    assert not private_uses("class Link:\n    pass\nself._transport = transport\n"
                            "super()._channel_closed(c, r)\nLink._closed(self, c, r)\n"
                            "name.replace('_', ' ')")
    assert private_uses(ADAPTER.read_text(), "wire.py")  # the adapter itself does


def test_only_the_adapter_touches_pika_private_names():
    uses = [use for tree in TREES for path in sorted((ROOT / tree).rglob("*.py"))
            if path != ADAPTER
            for use in private_uses(path.read_text(), str(path.relative_to(ROOT)))]
    assert not uses, "pika private names outside drivers/amqp/wire.py:\n" + "\n".join(uses)
