"""Reading YAML that people wrote, safely: every spec file and every ``--set`` value goes here.

A file is read as at most :data:`MAX_FILE_BYTES` bytes, decoded as strict UTF-8 and composed by a
SafeLoader that refuses repeated keys, keys that are lists or mappings, nesting deeper than
:data:`MAX_DEPTH` levels, and documents that hold more than :data:`MAX_NODES` values once their
aliases are expanded (or that contain themselves). Sizes are counted while composing, where an
alias costs the size of the node it names, so nothing is expanded before it is known to be small.
Every refusal is a :class:`SpecError` naming the file and the line: never a traceback, a hang or
a memory blow-up. Events come from libyaml when PyYAML has it (a 1 MiB file scans in a blink);
the composing, where the limits are kept, is PyYAML's own Python composer.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.reader import Reader
from yaml.resolver import Resolver

from orchestrator.errors import Problem, SpecError

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 20_000
MAX_DIGITS = 100
NOT_FOUND = "file not found"
_TEXT = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"


class PlusSigned(float):
    """A number written with an explicit ``+`` (``+50``): a step increment, not an absolute rate."""

    def __str__(self) -> str:
        return "+" + format(float(self), "g")


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a spec file may not be (too deep, too big once expanded, recursive)."""


class _PythonParser(Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's own event parser, for a PyYAML built without libyaml."""

    def __init__(self, stream: str):
        Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


try:
    from yaml.cyaml import CParser as _Parser
except ImportError:  # PyYAML without libyaml: slower, same limits
    _Parser = _PythonParser


class SpecLoader(Composer, _Parser, SafeConstructor, Resolver):
    """A safe loader (the classes of ``yaml.CSafeLoader``, with the Python composer) that
    remembers an explicit ``+`` sign on numbers and enforces this module's limits. Repeated
    and non-text keys are collected in ``problems`` (all are reported); the other limits stop
    at once."""

    def __init__(self, stream: str):
        _Parser.__init__(self, stream)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        Composer.__init__(self)
        self.problems: list[Problem] = []
        self._depth = 0
        self._nodes = 0  # values composed so far, an alias counting as all of the node it names
        self._sizes: dict[int, int] = {}  # id of a finished anchored node -> its expanded size

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        """Compose one node, counting its expanded size and depth before going on."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            named = self.anchors.get(event.anchor)
            if named is not None:
                if id(named) not in self._sizes:
                    raise _Refused(problem=f"alias *{event.anchor} is used inside the value it "
                                           "names; a spec cannot contain itself",
                                   problem_mark=event.start_mark)
                self._count(self._sizes[id(named)], event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(problem=f"nested more than {MAX_DEPTH} levels deep",
                           problem_mark=event.start_mark)
        before = self._nodes
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._count(1, event.start_mark)
        if getattr(event, "anchor", None) is not None:
            self._sizes[id(node)] = self._nodes - before
        return node

    def compose_mapping_node(self, anchor: str | None) -> yaml.MappingNode:
        """Compose a mapping; note every key that repeats an earlier one or is not text."""
        node = super().compose_mapping_node(anchor)
        first: dict[str, int] = {}
        for key, _ in node.value:
            line = key.start_mark.line + 1
            if not isinstance(key, yaml.ScalarNode):
                self.problems.append(Problem("", "a key must be text, not a list or a mapping",
                                             line))
            elif key.tag not in (_TEXT, _MERGE):
                kind = key.tag.rsplit(":", 1)[-1]
                self.problems.append(Problem("", f"key {key.value!r} is read as {kind}, not "
                                                 f"text; quote it ('{key.value}': ...) if it "
                                                 f"is meant", line))
            elif key.value in first and key.tag == _TEXT:
                self.problems.append(Problem("", f"key {key.value!r} repeats the one on line "
                                                 f"{first[key.value]}; give each key once",
                                             line))
            else:
                first[key.value] = line
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """Construct a value; a scalar its tag cannot be built from (``!!int x``, the date
        ``2024-13-45``) is a YAML error at its line."""
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, AttributeError, OverflowError) as error:
            kind = node.tag.rsplit(":", 1)[-1]
            text = _short(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            raise ConstructorError(problem=f"cannot read {text} as {kind} ({error})",
                                   problem_mark=node.start_mark) from None

    def _count(self, nodes: int, mark: yaml.Mark) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            raise _Refused(problem=f"more than {MAX_NODES:,} values once aliases are expanded "
                                   "(an alias bomb?); a spec file is far smaller",
                           problem_mark=mark)


def _construct_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
    if len(node.value) > MAX_DIGITS:
        raise _Refused(problem=f"a number of {len(node.value):,} characters; no number in a "
                               f"spec needs more than {MAX_DIGITS}", problem_mark=node.start_mark)
    value = (yaml.SafeLoader.construct_yaml_int if node.tag.endswith(":int")
             else yaml.SafeLoader.construct_yaml_float)(loader, node)
    return PlusSigned(value) if str(node.value).startswith("+") else value


SpecLoader.add_constructor("tag:yaml.org,2002:int", _construct_number)
SpecLoader.add_constructor("tag:yaml.org,2002:float", _construct_number)


def unreadable(path: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """Why ``path`` cannot be read as a file of at most ``limit`` bytes (missing, a directory,
    a device or pipe, too big, not permitted), or ``None`` if it can be tried."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return NOT_FOUND
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        return _why(error)
    if stat.S_ISDIR(info.st_mode):
        return "a directory, not a file"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a device, pipe or socket)"
    if info.st_size > limit:
        return f"{info.st_size:,} bytes; at most {limit:,} are read"
    return None


def resolve(path: Path) -> Path:
    """``path`` made absolute with symbolic links followed where they can be (a loop or a name
    the system refuses is left for :func:`unreadable` to name, not raised here)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic link loop
        return Path(os.path.abspath(path))


def read_file(path: Path) -> tuple[dict[str, Any], yaml.Node]:
    """The mapping of fields a spec file holds, and its node tree (for line numbers)."""
    text = _decode(path, _read_bytes(path))
    node, document = _parse(text, str(path))
    if not isinstance(document, dict):
        kind = ("nothing" if document is None else "a list" if isinstance(document, list)
                else f"a single value ({_short(document)})")
        raise SpecError(str(path), [Problem("", f"expected a mapping of fields at the top level "
                                                f"(name: ...), got {kind}",
                                            node.start_mark.line + 1 if node else None)])
    return document, node


def parse_value(text: str) -> Any:
    """A ``--set`` value read as YAML under the same limits; ``ValueError`` says why not."""
    try:
        return _parse(text, "--set")[1]
    except SpecError as error:
        raise ValueError("; ".join(p.message for p in error.problems)) from None


def _read_bytes(path: Path) -> bytes:
    why = unreadable(path)
    if why is None:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                why = f"more than {MAX_FILE_BYTES:,} bytes; at most that many are read"
        except OSError as error:
            why = _why(error)
    if why is not None:
        raise SpecError(str(path), [Problem("", f"cannot read file: {why}")])
    return data


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        start = error.start
        line = data.count(b"\n", 0, start) + 1
        column = start - data.rfind(b"\n", 0, start)
        raise SpecError(str(path), [Problem(
            "", f"not UTF-8 text: byte 0x{data[start]:02x} at column {column} (byte offset "
                f"{start}); a spec file is YAML saved as UTF-8 (is this a binary or Latin-1 "
                "file?)", line)]) from None


def _parse(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    loader = None
    try:
        loader = SpecLoader(text)
        node = loader.get_single_node()
        if loader.problems:
            raise SpecError(source, loader.problems)
        return node, (_tree(loader.construct_document(node)) if node is not None else None)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        reason = error.problem or "not understood"
        refused, column = isinstance(error, _Refused), mark is not None and mark.column > 0
        if "maximum nesting depth" in reason:  # PyYAML's own limit (6.0.4 on), met ahead
            reason, refused, column = f"nested more than {MAX_DEPTH} levels deep", True, False
        elif error.context and not refused:
            reason += f" ({error.context})"
        prefix = "" if refused else "not valid YAML: "
        where = f" (at column {mark.column + 1})" if column else ""
        raise SpecError(source, [Problem("", prefix + reason + where,
                                         mark.line + 1 if mark else None)]) from None
    except yaml.reader.ReaderError:
        bad = Reader.NON_PRINTABLE.search(text)
        where = bad.start() if bad else 0
        what = f"character {bad.group()!r} (#x{ord(bad.group()):04x})" if bad else "a character"
        raise SpecError(source, [Problem("", f"{what} is not allowed in YAML",
                                         text.count("\n", 0, where) + 1)]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _tree(value: Any) -> Any:
    """``value`` with every list and mapping its own: aliases share the objects they name, and
    a ``--set`` into one of them must not change the others."""
    if isinstance(value, dict):
        return {key: _tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_tree(item) for item in value]
    return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _why(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    return f"not a usable path ({error})"
