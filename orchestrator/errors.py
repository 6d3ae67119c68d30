"""Domain errors. They are raised deep down and turned into exit codes only at the CLI edge."""

from __future__ import annotations

from typing import Any


class SurgeError(Exception):
    """Base of every error surge reports to people without a traceback."""

    exit_code = 1


class SpecError(SurgeError):
    """A spec file (or a ``--set`` override) is invalid; lists every problem found."""

    exit_code = 2

    def __init__(self, path: str, problems: list[Any]):
        self.path = path
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        """One line per problem: ``file:line: field: what was expected``."""
        out = []
        for problem in self.problems:
            where = f"{self.path}:{problem.line}" if problem.line else self.path
            field = f" {problem.field}:" if problem.field else ""
            out.append(f"{where}:{field} {problem.message}")
        return "\n".join(out)


class ProvisionError(SurgeError):
    """A broker member could not be started, joined or stopped.

    ``temporary`` says whether trying again may help (a node still booting) or not (a port in
    use by something surge did not start, a missing binary).
    """

    def __init__(self, message: str, temporary: bool = False):
        self.temporary = temporary
        super().__init__(message)


class AgentError(SurgeError):
    """An agent process failed to start or to answer its control API."""
