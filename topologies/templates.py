"""Rendering the manifest templates of ``k8s/`` with Jinja2.

The convention (also in each template's header):

- ``{{ name | yaml }}``: a value as a YAML scalar, strings double-quoted with every special
  character escaped, so no value can change the manifest's structure;
- ``{{ name }}`` without the filter only inside a literal block (``key: |``), where any
  character but a line break is literal: a value holding a line break is refused;
- ``#% if flag`` ... ``#% endif`` (and ``#% for``): Jinja line statements, which read as YAML
  comments.

A missing value (``StrictUndefined``) or a template error is a :class:`ProvisionError` naming the
template file and line.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from orchestrator.errors import ProvisionError

LINE_STATEMENT = "#%"


def to_yaml(value: object) -> str:
    """``value`` (a string, number, boolean or ``None``) as a one-line YAML scalar: strings
    always double-quoted, with line breaks, quotes and control characters escaped."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # a StrictUndefined raises the error that names the missing value
    if not isinstance(value, str | bool | int | float | type(None)):
        raise jinja2.TemplateRuntimeError(
            f"the yaml filter takes a string, number, boolean or null, not "
            f"{type(value).__name__}")
    text = yaml.safe_dump(value, default_style='"' if isinstance(value, str) else None,
                          width=math.inf, allow_unicode=True)
    return text.removesuffix("\n...\n").removesuffix("\n")


def _no_line_break(value: object) -> object:
    """The finalizer of every ``{{ }}``: a line break would start a new line of the manifest."""
    if "\n" in str(value):
        raise jinja2.TemplateRuntimeError(
            f"value {str(value)[:40]!r}... holds a line break; put it in the manifest with the "
            "yaml filter")
    return value


def _environment(directory: Path) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory), undefined=jinja2.StrictUndefined,
        line_statement_prefix=LINE_STATEMENT, keep_trailing_newline=True,
        finalize=_no_line_break, autoescape=False)
    environment.filters["yaml"] = to_yaml
    return environment


def fill_template(path: Path, values: Mapping[str, object]) -> str:
    """The template at ``path`` rendered with ``values``; a missing value, a template error or
    a value that would break the manifest is a ProvisionError naming the file and line."""
    try:
        template = _environment(path.parent).get_template(path.name)
    except jinja2.TemplateNotFound:
        raise ProvisionError(f"template {path} does not exist") from None
    except OSError as error:
        raise ProvisionError(f"cannot read template {path}: {error.strerror}") from None
    except jinja2.TemplateSyntaxError as error:
        raise ProvisionError(f"template {path}, line {error.lineno}: {error.message}") from None
    try:
        return template.render(values)
    except jinja2.TemplateError as error:
        line = _template_line(error, template.filename)
        where = f", line {line}" if line else ""
        raise ProvisionError(f"template {path}{where}: {error.message}") from None


def _template_line(error: BaseException, filename: str | None) -> int | None:
    """The template line being rendered when ``error`` was raised (Jinja rewrites the traceback
    so that the template's frames carry its file name and line)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    return frames[-1].lineno if frames else None


def render_file(path: Path, values: Mapping[str, object]) -> dict[str, Any]:
    """A template file filled and parsed as YAML; any problem is a ProvisionError naming the
    file."""
    text = fill_template(path, values)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ProvisionError(f"template {path} rendered no valid YAML: {error}") from None
