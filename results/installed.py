"""Whether the analysis can run here: Spark and the plots are surge's ``analysis`` extra, left
out of the core install so that a load host installs without them.

The commands that analyse (``surge analyze``, and the analysis at the end of ``surge run`` and
``surge campaign``) look first and say what to install instead of failing on an import.
"""

from __future__ import annotations

from importlib.util import find_spec

from orchestrator.errors import SurgeError

ANALYSIS_PACKAGES = ("pyspark", "matplotlib", "numpy")
INSTALL_ANALYSIS = "pip install 'surge[analysis]'"


class AnalysisUnavailable(SurgeError):
    """The ``analysis`` extra is not installed; the message says what to install."""

    exit_code = 2


def missing_analysis_packages() -> list[str]:
    """The packages of the ``analysis`` extra that cannot be imported here."""
    return [name for name in ANALYSIS_PACKAGES if find_spec(name) is None]


def analysis_missing() -> str | None:
    """Why the analysis cannot run here and what to install, or None when it can."""
    missing = missing_analysis_packages()
    if not missing:
        return None
    return (f"the analysis needs surge's analysis extra ({', '.join(missing)} not installed): "
            f"{INSTALL_ANALYSIS}, and a Java runtime 17 or later for Spark")


def require_analysis() -> None:
    """Raise :class:`AnalysisUnavailable` unless the analysis can run here."""
    why = analysis_missing()
    if why:
        raise AnalysisUnavailable(why)
