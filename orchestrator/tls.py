"""TLS towards a broker: the certificates a client trusts and shows, as PEM text so that they
travel to agents on other hosts inside their control messages, and the ``ssl`` context built
from them (server certificates always verified; their name too unless turned off).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import FileError

MAX_PEM_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TlsMaterial:
    """CA certificates to trust (``""``: the system's), a client certificate and key (PEM),
    and the name server certificates must carry (``""``: the host connected to)."""

    ca_pem: str = ""
    cert_pem: str = ""
    key_pem: str = field(default="", repr=False)
    server_name: str = ""
    check_server_name: bool = True

    @classmethod
    def from_files(cls, ca_file: Path | None = None, cert_file: Path | None = None,
                   key_file: Path | None = None, server_name: str | None = None,
                   check_server_name: bool = True, where: str = "tls") -> TlsMaterial:
        """Read the named PEM files now; :class:`FileError` names the field and the file."""
        return cls(read_pem(ca_file, f"{where}.ca_file"), read_pem(cert_file, f"{where}.cert_file"),
                   read_pem(key_file, f"{where}.key_file"), server_name or "", check_server_name)

    def context(self) -> ssl.SSLContext:
        """A client context: TLS 1.2 or later, the server's certificate verified against
        ``ca_pem`` (or the system's CAs), its name checked unless ``check_server_name`` is off,
        and the client certificate shown where there is one. ``ssl.SSLError`` on bad PEM."""
        context = ssl.create_default_context(cadata=self.ca_pem or None)
        if not self.ca_pem:
            context.load_default_certs()
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_server_name
        context.verify_mode = ssl.CERT_REQUIRED
        if self.cert_pem:
            _load_chain(context, self.cert_pem, self.key_pem)
        return context

    def name_for(self, host: str) -> str:
        """The name ``host``'s certificate must carry."""
        return self.server_name or host


def read_pem(path: Path | None, where: str) -> str:
    """The text of a PEM file (``""`` for no file); :class:`FileError` naming ``where``."""
    if path is None:
        return ""
    try:
        if path.stat().st_size > MAX_PEM_BYTES:
            raise FileError(f"{where}: {path} is larger than {MAX_PEM_BYTES:,} bytes; expected "
                            f"PEM certificates or a key")
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise FileError(f"{where}: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise FileError(f"{where}: cannot read {path}: {error}") from None
    if "-----BEGIN " not in text:
        raise FileError(f"{where}: {path} holds no PEM block (-----BEGIN ...)")
    return text


def _load_chain(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """``ssl`` loads a certificate chain only from files: write both to a private temporary
    file, load it, remove it at once."""
    handle, name = tempfile.mkstemp(prefix="surge-tls-", suffix=".pem")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(cert_pem.rstrip("\n") + "\n" + key_pem)
        context.load_cert_chain(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
