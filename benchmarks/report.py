"""What the benchmark scripts share besides timing (timing.py): the checkout's revision, the lines a table
is printed under, and writing one script's section of RESULTS.md."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from timing import cpu_model, load_average, machine

__all__ = ["RESULTS", "cpu_model", "git_revision", "publish", "run_lines", "write_section"]

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def git_revision() -> str:
    """The checkout's commit and whether src/ (and kernels/) have uncommitted changes (read-only git calls)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=Path(__file__).resolve().parent.parent, env=env,
                              capture_output=True, text=True, check=True).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        src = bool(git("status", "--porcelain", "--", "src").strip())
        kernels = bool(git("status", "--porcelain", "--", "kernels").strip())
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return (f"{head}; uncommitted changes under src/: {'yes' if src else 'no'}, "
            f"under kernels/: {'yes' if kernels else 'no'}")


def run_lines(command: str) -> list[str]:
    """The command, date, machine (with the load at the end) and revision lines of a RESULTS.md section."""
    import datetime
    return [f"* command: `{command}`",
            f"* date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            f"* machine: {machine()}; 1-minute load average at the end: {load_average():.2f}",
            f"* revision: {git_revision()}"]


def write_section(text: str, section: str, path: Path = RESULTS) -> None:
    """Replace `section` (a '## name' heading and what follows) of RESULTS.md, or add it,
    keeping the other sections."""
    old = path.read_text() if path.exists() else ""
    lines = old.splitlines()
    start = next((n for n, line in enumerate(lines) if line.strip() == section), None)
    if start is None:
        kept_before, kept_after = lines, []
    else:
        end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines))
        kept_before, kept_after = lines[:start], lines[end:]
    if not any(line.startswith("# ") for line in kept_before):
        kept_before = ["# Benchmark results", ""] + kept_before
    before = "\n".join(kept_before).rstrip("\n")
    after = "\n".join(kept_after).strip("\n")
    out = before + "\n\n" + text.rstrip("\n") + "\n"
    if after:
        out += "\n" + after + "\n"
    path.write_text(out)


def publish(text: str, section: str, write: bool) -> None:
    """Print a script's table and, for a full run, replace its section of RESULTS.md."""
    print(text)
    if write:
        write_section(text, section)
