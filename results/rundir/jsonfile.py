"""Reading the JSON files surge wrote earlier (``run.json``, ``analysis.json``, state files),
which may have been damaged, truncated or replaced since: every way one can be wrong is a
:class:`FileError` of one line that names the file; and writing them so that no reader ever
sees half of one (:func:`replace_text`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orchestrator.errors import FileError
from orchestrator.specs.yamlsafe import NOT_FOUND, unreadable

MAX_JSON_BYTES = 256 * 1024 * 1024


def read_object(path: Path, missing: str = NOT_FOUND) -> dict[str, Any]:
    """The JSON object in ``path``; ``missing`` says what a missing file means."""
    why = unreadable(path, MAX_JSON_BYTES)
    try:
        data = b"" if why else path.read_bytes()
    except OSError as error:
        why = f"cannot read ({error.strerror})"
    if why:
        raise FileError(f"{path}: {missing if why == NOT_FOUND else why}")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise FileError(f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
                        f"{error.start}); not a file surge wrote, or a damaged one") from None
    except json.JSONDecodeError as error:
        raise FileError(f"{path}:{error.lineno}: not valid JSON ({error.msg}, column "
                        f"{error.colno}); truncated or damaged?") from None
    except RecursionError:
        raise FileError(f"{path}: JSON nested too deeply; not a file surge wrote") from None
    if not isinstance(value, dict):
        raise FileError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: beside it under a hidden name that no pattern of
    ``*.json`` matches, then renamed into place."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)
