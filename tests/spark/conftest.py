"""One real local Spark session for the whole suite."""

import shutil

import pytest

if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark", allow_module_level=True)


@pytest.fixture(scope="session")
def spark():
    from results.spark import session
    return session("local[2]")
