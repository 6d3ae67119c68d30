"""The files surge reads at run time that are not Python: the Kubernetes templates (``k8s/``)
and the Ansible playbooks and roles (``ansible/``), shipped inside the package.

In a checkout ``k8s`` and ``ansible`` here are links to the repository's top-level folders of
the same names (the files people read and edit); a wheel holds copies. Either way
:func:`asset` is the one way to reach them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def asset(*parts: str) -> Path:
    """The path of a shipped file or folder, e.g. ``asset("k8s", "mq")``.

    surge is installed as files on disk (a wheel unpacked into site-packages, or a checkout),
    so the resource is a real path that templates and ``ansible-runner`` can open."""
    return Path(str(files(__name__).joinpath(*parts))).resolve()
