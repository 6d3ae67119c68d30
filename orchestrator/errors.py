"""Domain errors. They are raised deep down and turned into exit codes only at the CLI edge."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where it is and what was expected."""

    field: str
    message: str
    line: int | None = None


class SurgeError(Exception):
    """Base of every error surge reports to people without a traceback."""

    exit_code = 1


class SpecError(SurgeError):
    """A spec file (or a ``--set`` override) is invalid; lists every problem found, in the
    order of their lines."""

    exit_code = 2
    shown = 50  # problems rendered; the rest are counted

    def __init__(self, path: str, problems: list[Problem]):
        self.path = path
        self.problems = sorted(problems, key=lambda p: p.line or 0)
        super().__init__(self.render())

    def render(self) -> str:
        """One line per problem: ``file:line: field: what was expected``."""
        out = []
        for problem in self.problems[:self.shown]:
            where = f"{self.path}:{problem.line}" if problem.line else self.path
            field = f" {problem.field}:" if problem.field else ""
            out.append(one_line(f"{where}:{field} {problem.message}"))
        if len(self.problems) > self.shown:
            out.append(one_line(f"{self.path}: ... and {len(self.problems) - self.shown:,} "
                                f"more problems"))
        return "\n".join(out)


class FileError(SurgeError):
    """A file surge reads (a run's ``run.json``, say) is missing, unreadable or not what it
    should be; the message names it."""

    exit_code = 2


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` as one readable line: line breaks and other control characters escaped (a file
    name or value with a newline cannot split a problem over lines), and cut in the middle to
    ``limit`` characters (a huge value cannot flood the terminal)."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    half = (limit - 9) // 2
    return text if len(text) <= limit else f"{text[:half]} [...] {text[-half:]}"


class ProvisionError(SurgeError):
    """A broker member could not be started, joined or stopped.

    ``temporary`` says whether trying again may help (a node still booting) or not (a port in
    use by something surge did not start, a missing binary).
    """

    def __init__(self, message: str, temporary: bool = False):
        self.temporary = temporary
        super().__init__(message)


class AgentError(SurgeError):
    """An agent process failed to start or to answer its control API.

    ``unreachable`` says that the call never got an answer (refused, reset, timed out): the
    agent may be gone, where an answer that refused the call (HTTP 4xx/5xx) says it runs.
    """

    def __init__(self, message: str, unreachable: bool = False):
        self.unreachable = unreachable
        super().__init__(message)
