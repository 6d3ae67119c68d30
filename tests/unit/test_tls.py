"""TLS material read from the files a topology names and turned into a client context."""

from __future__ import annotations

import ssl
import tempfile

import pytest

from orchestrator.errors import FileError
from orchestrator.tls import TlsMaterial
from tests.integration.outside_broker import make_certificates


def test_a_client_certificate_and_its_key_load_and_the_server_is_always_verified(tmp_path,
                                                                                  monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    made = make_certificates(tmp_path / "a")
    material = TlsMaterial.from_files(made["ca"], made["cert"], made["key"], "broker.example")
    assert "PRIVATE KEY" not in repr(material)
    context = material.context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert material.name_for("10.0.0.1") == "broker.example"
    assert list((tmp_path / "tmp").iterdir()) == []  # the chain's temporary file is gone


def test_a_key_that_is_not_the_certificates_is_refused(tmp_path):
    one, other = make_certificates(tmp_path / "a"), make_certificates(tmp_path / "b")
    with pytest.raises(ssl.SSLError):
        TlsMaterial.from_files(one["ca"], one["cert"], other["key"]).context()


def test_unreadable_material_names_the_field(tmp_path):
    with pytest.raises(FileError, match=r"existing\.tls\.cert_file: .* does not exist"):
        TlsMaterial.from_files(cert_file=tmp_path / "nope.pem", where="existing.tls")
