"""Filling the manifest templates of ``k8s/`` (the convention is in each template's header):
``${name}`` scalars, whole-line ``${name}`` blocks indented like the placeholder, and
``#% if flag`` ... ``#% endif`` sections."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ProvisionError

_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\$\{(?P<name>\w+)\}[ \t]*$")


def fill_template(text: str, values: Mapping[str, object],
                  blocks: Mapping[str, str] | None = None,
                  flags: Mapping[str, bool] | None = None) -> str:
    """Fill a template of ``k8s/`` (the convention is in its header): keep ``#% if flag``
    sections whose flag is true, drop whole-line comments, expand whole-line block placeholders
    from ``blocks`` (each line indented like the placeholder, taken literally), then substitute
    ``${name}`` scalars from ``values``. A placeholder or flag without a value is an error,
    never left in the output."""
    blocks, flags = blocks or {}, flags or {}
    kept: list[str] = []
    open_flags: list[bool] = []
    for number, line in enumerate(text.splitlines(), start=1):
        directive = line.strip()
        if directive.startswith("#% if "):
            flag = directive.removeprefix("#% if ").strip()
            if flag not in flags:
                raise KeyError(f"line {number}: no value for flag {flag!r}")
            open_flags.append(bool(flags[flag]))
            continue
        if directive == "#% endif":
            if not open_flags:
                raise ValueError(f"line {number}: #% endif without #% if")
            open_flags.pop()
            continue
        if not all(open_flags) or directive.startswith("#"):
            continue
        block = _BLOCK.match(line)
        if block and block["name"] in blocks:
            kept += [block["indent"] + part.replace("$", "$$") if part else part
                     for part in blocks[block["name"]].splitlines()]
        else:
            kept.append(line)
    if open_flags:
        raise ValueError("#% if without #% endif")
    for name, value in values.items():
        if "\n" in str(value):
            raise ValueError(f"scalar {name!r} holds a line break; pass it as a block")
    try:
        return string.Template("\n".join(kept) + "\n").substitute(values)
    except KeyError as missing:
        raise KeyError(f"no value for placeholder ${{{missing.args[0]}}}") from None


def render_file(path: Path, values: Mapping[str, object],
                 blocks: Mapping[str, str] | None = None,
                 flags: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """A template file filled and parsed as YAML; any problem is a ProvisionError naming the
    file."""
    try:
        text = fill_template(path.read_text(), values, blocks, flags)
    except (KeyError, ValueError) as error:
        raise ProvisionError(f"template {path}: {error.args[0]}") from None
    except OSError as error:
        raise ProvisionError(f"cannot read template {path}: {error.strerror}") from None
    return yaml.safe_load(text)
