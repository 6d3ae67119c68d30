"""``python -m orchestrator.cli``: the ``surge`` command."""

from orchestrator.cli import app

app()
