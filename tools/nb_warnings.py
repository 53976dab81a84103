"""A pytest plugin for nbval runs: a notebook cell whose output shows a deprecation warning fails.

A deprecation warning in a lesson's output is a pink box the reader did not cause and cannot fix, and it says an API
the course uses is going away. nbval compares outputs only where a cell asks for it (`--nbval-lax`), so this plugin
reads every executed cell's outputs and fails the cell that printed one. `make test-versions` loads it
(`-p tools.nb_warnings`) on every stack it tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import pytest

WARNING = re.compile(r"\b\w*(DeprecationWarning|FutureWarning)\b")  # also subclasses: PyparsingDeprecationWarning


def _texts(outputs: Iterable[dict]) -> Iterator[str]:
    for output in outputs:
        if output.get("output_type") == "stream":
            yield str(output.get("text", ""))
        elif output.get("output_type") in {"execute_result", "display_data"}:
            yield str(output.get("data", {}).get("text/plain", ""))


def deprecation_lines(outputs: Iterable[dict]) -> list[str]:
    """The output lines that show a DeprecationWarning or FutureWarning (or a subclass named like one)."""
    return [line.strip() for text in _texts(outputs) for line in text.splitlines() if WARNING.search(line)]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """Turn a passed nbval cell into a failure when its outputs show a deprecation warning."""
    outcome = yield
    report = outcome.get_result()
    outputs = getattr(item, "test_outputs", None)  # nbval's IPyNbCell keeps the executed cell's outputs here
    if call.when != "call" or not report.passed or not outputs:
        return
    lines = deprecation_lines(outputs)
    if lines:
        report.outcome = "failed"
        report.longrepr = "the cell's output shows a deprecation warning:\n  " + "\n  ".join(lines[:5])
