"""The compiled hot path (Cython twins of the per-message code, :mod:`results.rundir.compiled`).

Built where a C compiler is found, as optional extensions: without one, or with
``SURGE_PURE_BUILD=1``, the build makes a pure wheel that runs the same Python code.
Everything else about the package is in pyproject.toml.
"""

import os

from setuptools import Extension, setup

EXTENSIONS = [("drivers._speedups", "drivers/_speedups.pyx"),
              ("results.rundir._histogram", "results/rundir/_histogram.pyx")]


def extensions() -> list:
    """The compiled modules, or none for a pure build (or where Cython is missing)."""
    if os.environ.get("SURGE_PURE_BUILD", "").strip() not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    modules = [Extension(name, [source], optional=True, extra_compile_args=["-O2"],
                         extra_link_args=["-s"])  # stripped: no debug symbols in the wheel
               for name, source in EXTENSIONS]
    return cythonize(modules, quiet=True, compiler_directives={"language_level": 3})


setup(ext_modules=extensions())
