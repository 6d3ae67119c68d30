"""The example specs shipped with surge: scenarios, topologies and campaigns, for
``surge examples DIR``.

In a checkout ``scenarios`` and ``campaigns`` here are links to the repository's top-level
folders (the files people read and edit); a wheel holds copies of their YAML files. The
topologies are the YAML files of the :mod:`topologies` package itself (a link to a package folder
would make a second package of it). They refer to each other by relative paths
(``topology: ../topologies/local-3.yaml``, ``scenario: ../scenarios/quickstart.yaml``), so they
are written out with the same layout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from orchestrator.errors import FileError
from orchestrator.specs import schema

# each folder written out -> (the package holding its files, the folder in that package)
FOLDERS = {"scenarios": (__name__, "scenarios"), "topologies": ("topologies", ""),
           "campaigns": (__name__, "campaigns")}


def example_files() -> dict[Path, Path]:
    """Every shipped example: its path relative to the examples' root -> the file to read."""
    found = {}
    for folder, (package, inside) in FOLDERS.items():
        source = Path(str(files(package).joinpath(inside))).resolve()
        for path in sorted(source.glob("*.yaml")):
            found[Path(folder, path.name)] = path
    return found


def write_examples(target: Path, force: bool = False) -> list[Path]:
    """Copy every example into ``target`` (``target/scenarios/...`` and so on), with the JSON
    Schemas their first lines name (``target/schemas/``), and return the paths written.
    Nothing is written when a file would be overwritten, unless ``force``."""
    examples = example_files()
    if not examples:
        raise FileError("no examples found in this installation of surge")
    if target.exists() and not target.is_dir():
        raise FileError(f"{target}: not a directory")
    contents = {name: source.read_bytes() for name, source in examples.items()}
    contents |= {Path(schema.FOLDER, schema.file_name(kind)): schema.schema_text(kind).encode()
                 for kind in schema.MODELS}
    existing = [target / name for name in contents if (target / name).exists()]
    if existing and not force:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        raise FileError(f"{existing[0]}{more} already exist; --force overwrites them")
    written = []
    for name, content in contents.items():
        destination = target / name
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(content)
        except OSError as error:
            raise FileError(f"{destination}: cannot write: {error.strerror or error}") from None
        written.append(destination)
    return written
