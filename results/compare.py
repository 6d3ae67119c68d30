"""Finished runs side by side at their final step: document 000's Table 2 shape."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from orchestrator.errors import SurgeError
from results.steptable import StepRow, fixed_width


def final_step(run_dir: Path) -> tuple[str, StepRow, str]:
    """A run's scenario name, the last row of its step table and its accounting verdict."""
    path = run_dir / "run.json"
    try:
        manifest = json.loads(path.read_text())
        last = manifest["steps"][-1]
    except FileNotFoundError:
        raise SurgeError(f"{path}: not found; expected a run directory") from None
    except (ValueError, KeyError, IndexError) as error:
        raise SurgeError(f"{path}: no step table ({type(error).__name__}: {error}); "
                         "did the run finish?") from None
    names = {f.name for f in dataclasses.fields(StepRow)}
    row = StepRow(**{k: v for k, v in last.items() if k in names})
    accounting = manifest.get("accounting") or {}
    verdict = "balanced" if accounting.get("balanced") else \
        f"lost {accounting.get('lost', '?')}" if accounting else "not accounted"
    return manifest["scenario"]["name"], row, verdict


def as_text(run_dirs: list[Path]) -> str:
    """One line per run: target and achieved rate, members, mean member and host CPU."""
    lines = [["test", "target msg/s", "achieved msg/s", "members", "member CPU% (mean)",
              "host CPU%", "p99 ms", "accounting"]]
    for run_dir in run_dirs:
        name, row, verdict = final_step(run_dir)
        cpu = sum(row.cpu_percent.values()) / len(row.cpu_percent) if row.cpu_percent else 0.0
        lines.append([name, f"{row.target_rate:,.0f}", f"{row.achieved_rate:,.0f}",
                      str(row.members), f"{cpu:.1f}", f"{row.host_cpu_percent:.1f}",
                      f"{row.p99_ms:.2f}", verdict])
    return fixed_width(lines)
