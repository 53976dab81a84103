"""The report of a mutmut run (tools/mutate.py): the score, and each surviving mutant with its diff, as Markdown."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Statuses that count as a test catching the bug (a timeout is a mutant that made the tests hang: caught).
CAUGHT = ("killed", "timeout", "caught by type check", "segfault")


@dataclass
class Results:
    """Every mutant's status, by name (as `mutmut results --all true` prints them)."""

    status: dict[str, str] = field(default_factory=dict)

    def counts(self) -> Counter:
        """How many mutants have each status."""
        return Counter(self.status.values())

    def survivors(self) -> list[str]:
        """Names of the mutants that ran and that no test caught."""
        return sorted(name for name, status in self.status.items() if status == "survived")

    def score(self) -> float | None:
        """Caught / (caught + survived); None when no mutant was checked."""
        counts = self.counts()
        caught = sum(counts[s] for s in CAUGHT)
        checked = caught + counts["survived"]
        return caught / checked if checked else None

    def summary(self) -> str:
        """One line: the score and the counts."""
        score = self.score()
        shown = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        return f"score {'n/a' if score is None else f'{100 * score:.1f}%'} ({shown or 'no mutants'})"


def _mutmut(work: Path, *args: str) -> str:
    mutmut = Path(sys.executable).with_name("mutmut")
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([str(mutmut), *args], cwd=work, env=env, capture_output=True, text=True).stdout


def parse_results(work: Path) -> Results:
    """Read every mutant's status from the mutmut run in `work`."""
    results = Results()
    for line in _mutmut(work, "results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            results.status[name] = status
    return results


def write_report(
    path: Path,
    results: Results,
    *,
    work: Path,
    scope: str,
    seconds: float,
    cut_off: bool,
    diff: Callable[[str], str] | None = None,
) -> None:
    """Write the Markdown report: scope, duration, score, then each survivor's diff (`mutmut show` by default)."""
    diff = diff or (lambda name: _mutmut(work, "show", name))
    lines = [
        "# Mutation testing report",
        "",
        f"- Modules mutated: {scope}",
        f"- Wall time: {seconds / 60:.1f} min" + (" (cut off by the time limit: not every mutant ran)" * cut_off),
        f"- Result: {results.summary()}",
        "",
        "A survivor is a one-token change to the library that no test noticed. Kill it with a test that fails on it,",
        "or mark the line `# pragma: no mutate` with a reason when the change is equivalent (cannot be observed).",
        "",
        f"## Surviving mutants ({len(results.survivors())})",
        "",
    ]
    for name in results.survivors():
        lines += [f"### {name}", "", "```diff", diff(name).strip(), "```", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
