"""Credentials in a topology: a user name and where its password is kept, never the password.

A password comes from an environment variable (``password_env``) or a file (``password_file``,
relative to the topology file); written inline it is refused, because topology files are
copied into run directories, campaign records and version control. The value is read only
when a provisioner needs it (:meth:`Credentials.password`) and travels to agents over their
authenticated control channel, never on a command line or in a file of a run.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from orchestrator.errors import SurgeError
from orchestrator.specs.base import FilePath, Loc, Spec

log = logging.getLogger(__name__)

MAX_SECRET_BYTES = 64 * 1024
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
INLINE_REFUSED = ("a password is never written in a topology (it is copied into run "
                  "directories and records): give password_env (the name of an environment "
                  "variable) or password_file (a file only you can read)")


class SecretError(SurgeError):
    """A secret the topology names cannot be read (variable unset, file missing or empty)."""

    exit_code = 2


def _beside_spec(path: Path, info: ValidationInfo) -> Path:
    """``path`` relative to the directory of the spec file being loaded, if the loader says
    which (its validation context's ``base_dir``); absolute paths and ``~`` as written."""
    path = path.expanduser()
    base = (info.context or {}).get("base_dir")
    return path if path.is_absolute() or base is None else Path(base) / path


SpecFile = Annotated[FilePath, AfterValidator(_beside_spec)]
"""A file a topology names (a password file, a CA certificate): relative to the topology."""


def _has_userinfo(text: str) -> bool:
    """Whether a URL carries ``user:password@`` (or ``user@``) before its host."""
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://[^/?#]*@", text, re.IGNORECASE))


INLINE_SECRET = "inline_secret"
"""The error type of a secret written in a spec: the loader never echoes its input."""


def refuse_userinfo(url: str) -> str:
    """``url`` unchanged, or an :data:`INLINE_SECRET` error if it carries credentials (the
    message names the URL's host part only)."""
    if _has_userinfo(url):
        raise PydanticCustomError(INLINE_SECRET, "{where} is written with credentials before "
                                  "the host; {refused}, and the user in credentials.user",
                                  {"where": repr(url.split("@")[-1]), "refused": INLINE_REFUSED})
    return url


class Credentials(Spec):
    """Who surge connects as: a user, and the environment variable or file holding its
    password."""

    user: str = Field(min_length=1, max_length=255, description="user name")
    password_env: str | None = Field(None, pattern=_ENV_NAME,
                                     description="environment variable holding the password")
    password_file: SpecFile | None = Field(
        None, description="file holding the password (one line; relative to the topology)")

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data: Any) -> Any:
        if isinstance(data, dict) and "password" in data:
            raise ValueError(INLINE_REFUSED)
        return data

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Exactly one source of the password."""
        if (self.password_env is None) == (self.password_file is None):
            return [((), "give exactly one of password_env or password_file")]
        return []

    def password(self, where: str = "credentials") -> str:
        """The password, read now; :class:`SecretError` naming ``where`` (the field's path)
        and what is wrong if it cannot be."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if not value:
                raise SecretError(f"{where}.password_env: environment variable "
                                  f"{self.password_env} is not set or empty")
            return value
        assert self.password_file is not None
        return read_secret_file(self.password_file, f"{where}.password_file")


def secret_variables(spec: Spec) -> set[str]:
    """The environment variables ``spec`` (and every spec inside it) reads passwords from: the
    processes surge starts do not inherit them."""
    if isinstance(spec, Credentials):
        return {spec.password_env} if spec.password_env else set()
    found: set[str] = set()
    for name in type(spec).model_fields:
        value = getattr(spec, name)
        items = value.values() if isinstance(value, dict) else \
            value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, Spec):
                found |= secret_variables(item)
    return found


def read_secret_file(path: Path, where: str) -> str:
    """The first line of a secret file; a warning if others than its owner may read it."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"{where}: {path} is not a regular file")
        if info.st_size > MAX_SECRET_BYTES:
            raise SecretError(f"{where}: {path} is {info.st_size:,} bytes; a password file "
                              f"holds one line")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SecretError(f"{where}: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SecretError(f"{where}: cannot read {path}: {error}") from None
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning("%s: %s can be read by other users (mode %o); chmod 600 it", where, path,
                    stat.S_IMODE(info.st_mode))
    value = text.splitlines()[0] if text.strip() else ""
    if not value:
        raise SecretError(f"{where}: {path} is empty")
    return value
