"""The secrets of one RabbitMQ topology surge provisions: its own Erlang cookie and the broker
user its clients, management calls and ``rabbitmqctl`` use.

They are made at random when the topology is first provisioned and kept, as JSON, in a file of
the topology's state that only its owner can read (mode 0600, in a directory of mode 0700), so
every later command (``status``, ``run``, ``down``) finds the same ones; ``surge down`` removes
them with the rest of the state. They never go into a run directory, a command line or a log.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import ProvisionError

#: The broker user surge creates (instead of guest) on the clusters it provisions.
USER = "surge"
#: The Erlang cookie file in a node's (and ``rabbitmqctl``'s) ``HOME``.
COOKIE_FILE = ".erlang.cookie"


@dataclass(frozen=True)
class ClusterSecrets:
    """A topology's Erlang cookie and its broker user (``repr`` shows neither secret)."""

    cookie: str = field(repr=False)
    user: str
    password: str = field(repr=False)

    def client_settings(self) -> dict[str, str]:
        """The AMQP driver's settings for this cluster (:class:`drivers.amqp.settings.
        AmqpSettings`): its user and password."""
        return {"user": self.user, "password": self.password}


class KeptSecrets:
    """For provisioners of surge's own clusters: the topology's secrets, read once from the
    ``secrets_file`` its first ``up`` made, and the clients' settings from them."""

    secrets_file: Path
    _secrets: ClusterSecrets | None = None

    def secrets(self) -> ClusterSecrets:
        """The topology's Erlang cookie and broker user (``ProvisionError`` if it was never
        provisioned)."""
        if self._secrets is None:
            self._secrets = read(self.secrets_file)
        return self._secrets

    def client_settings(self) -> dict[str, Any]:
        """The AMQP driver's settings: the topology's generated user and password."""
        return self.secrets().client_settings()


def generate() -> ClusterSecrets:
    """New random secrets: a 40-character cookie (upper-case hex, as Erlang makes them) and a
    48-character hex password (nothing in it needs quoting in ``rabbitmq.conf``)."""
    return ClusterSecrets(cookie=secrets.token_hex(20).upper(), user=USER,
                          password=secrets.token_hex(24))


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if need be and make it 0700; returns it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def load_or_create(path: Path) -> ClusterSecrets:
    """The secrets kept in ``path``; made and written there (0600, its directory 0700) if the
    file does not exist yet. A file that is not what this module writes is a ``ProvisionError``
    naming it."""
    private_dir(path.parent)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read(path)
    made = generate()
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"user": made.user, "password": made.password, "cookie": made.cookie}, handle)
    return made


def read(path: Path) -> ClusterSecrets:
    """The secrets kept in ``path`` (``ProvisionError`` if it is missing or damaged)."""
    try:
        data = json.loads(path.read_text())
        found = ClusterSecrets(cookie=data["cookie"], user=data["user"],
                               password=data["password"])
    except FileNotFoundError:
        raise ProvisionError(f"{path} is missing: the topology's credentials are made when it "
                             "is provisioned (surge up)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ProvisionError(f"{path} is damaged ({type(error).__name__}); stop the topology's "
                             f"processes by hand and delete {path.parent}") from None
    if not all(isinstance(v, str) and v for v in (found.cookie, found.user, found.password)):
        raise ProvisionError(f"{path} is damaged (an empty or non-text value); stop the "
                             f"topology's processes by hand and delete {path.parent}")
    return found


def write_cookie(home: Path, cookie: str) -> Path:
    """Write ``cookie`` to ``home/.erlang.cookie`` (mode 0400; ``home`` made 0700), replacing
    the file if it holds another one; returns its path."""
    private_dir(home)
    path = home / COOKIE_FILE
    try:
        if path.read_text() == cookie:
            os.chmod(path, 0o400)
            return path
        path.unlink()
    except FileNotFoundError:
        pass
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(cookie)
    return path
