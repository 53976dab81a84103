"""Notebooks never overclaim: markdown explains mechanisms, and outcomes are printed by code from the run's numbers.

A markdown cell may not state a measured outcome (a comparison, a speed-up, a bottleneck, a size, a percentage).
The only exception is a cell tagged `claim`, which quotes a seed post's claim in order to test it; it must name the
post. Code cells may not end with a bare expression whose value Jupyter would display (a stray `False`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Phrases that state how a measurement came out. Outcomes belong in code-printed verdicts (helpers.course.verdicts).
OUTCOME_PATTERNS = {
    "a 'what we saw' summary": r"\bwhat we saw\b",
    "a speed comparison": r"\b(faster|slower|quicker|speed-?ups?|sped up)\b",
    "a cost comparison": r"\b(cheaper|costlier|costs? (more|less)|more expensive|saves|saving)\b",
    "a bottleneck verdict": r"\b(bottleneck|input-bound|compute-bound|bounded by|keeps? up|hides? behind|waits? less)\b",
    "a shape of a curve": r"\b(flattens?|plateaus?|levels? off|peaks? at|saturates?)\b",
    "a ranking": r"\b(better|worse|best|worst|wins?|beats?|outperforms?|dominates?|hardly matters|no difference)\b",
    "a magnitude": r"\b(orders? of magnitude|several times|many times|gigabytes|megabytes|lie on top)\b",
    "a measured ratio": r"\d+(\.\d+)?\s?(×|x)(?![\w\d])",
    "a measured share": r"\d+(\.\d+)?\s?%",
    "a target stated as an outcome": r"\b(aims? at|reaches|becomes the)\b",
}
# A seed post's claim, quoted in order to be tested, may use them; the cell says so with this tag.
CLAIM_TAG = "claim"


def outcome_phrases(text: str) -> list[str]:
    """The outcome statements in a piece of markdown (code spans and LaTeX are not prose and are skipped)."""
    prose = re.sub(r"`[^`]*`", "", text)
    found = []
    for kind, pattern in OUTCOME_PATTERNS.items():
        found += [f"{kind}: '{m.group(0)}'" for m in re.finditer(pattern, prose, flags=re.IGNORECASE)]
    return found


def overclaims(notebook: nbformat.NotebookNode) -> list[str]:
    """Every markdown cell that states an outcome without being a tagged quotation of a seed's claim."""
    problems = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        if CLAIM_TAG in cell.metadata.get("tags", []):
            continue
        for phrase in outcome_phrases(cell.source):
            problems.append(f"cell {index}: {phrase}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_states_no_outcome(path):
    problems = overclaims(nbformat.read(path, as_version=4))
    assert not problems, (
        f"{path.name}: markdown states measured outcomes; print them from the numbers (helpers.course.verdicts) "
        f"or tag the cell '{CLAIM_TAG}' if it quotes a seed post's claim: {problems}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_claim_cells_quote_a_post(path):
    notebook = nbformat.read(path, as_version=4)
    for index, cell in enumerate(notebook.cells):
        if CLAIM_TAG in cell.metadata.get("tags", []):
            assert cell.cell_type == "markdown" and re.search(r"\bposts?\b", cell.source), (
                f"{path.name} cell {index}: a '{CLAIM_TAG}' cell must quote what a seed post claims"
            )


# The contradictions a reviewer found in the notebooks as they were: each must be caught.
KNOWN_OVERCLAIMS = [
    "On a CPU the HR-size model is so slow that the traditional loader hides behind it.",
    "throughput climbs with workers up to about the number of cores and then flattens",
    "`persistent_workers` saves the worker start-up at every epoch",
    "the seed's pipeline is bounded by PIL per image on the CPU cores",
    "the GAN step costs more compute than the generator alone",
    "For the full BSDS300 training set that is gigabytes against a few hundred megabytes.",
    "a flip or 90-degree turn then moves whole words, about five times cheaper than shuffling 3-byte pixels",
    "on a GPU the lazy-crop `DataLoader` becomes the bottleneck the decoded cache removes",
    "With the real dataset the `full` profile aims at 94%.",
    "the loss curves lie on top of each other",
]


@pytest.mark.parametrize("sentence", KNOWN_OVERCLAIMS)
def test_the_known_overclaims_are_caught(sentence):
    assert outcome_phrases(sentence), sentence


def test_mechanisms_pass():
    for sentence in (
        "JPEG and PNG are stored as one stream, so the first pixel access decodes the whole image.",
        "bf16 has fp32's 8 exponent bits and needs no scaler.",
        "Each worker is a process that competes for the same cores as the training step.",
    ):
        assert not outcome_phrases(sentence), sentence


VALUE_RETURNING_CALLS = {"show_table", "record_result", "torch.equal", "len", "LESSON.tag", "LESSON.finish"}


def _displayed_value(cell_source: str) -> str | None:
    """The last statement of a code cell when Jupyter would display its value (None when it would not)."""
    try:
        body = ast.parse(cell_source).body
    except SyntaxError:
        return None
    if not body or not isinstance(body[-1], ast.Expr):
        return None
    value = body[-1].value
    # a call usually returns None (nothing shows); these course helpers return text that would be displayed
    if isinstance(value, ast.Call) and ast.unparse(value.func) not in VALUE_RETURNING_CALLS:
        return None
    return ast.unparse(value)[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stray_expression_values(path):
    notebook = nbformat.read(path, as_version=4)
    strays = [
        f"cell {i}: {v}"
        for i, c in enumerate(notebook.cells)
        if c.cell_type == "code" and (v := _displayed_value(c.source)) is not None
    ]
    assert not strays, f"{path.name}: these cells display a stray value (assign it or end with print): {strays}"


def _only_imports(source: str) -> bool:
    """True for a cell of import statements alone (a list to read, not logic to follow)."""
    body = ast.parse(source).body
    return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_are_short(path):
    notebook = nbformat.read(path, as_version=4)
    long = [
        f"cell {i}: {len(c.source.splitlines())} lines"
        for i, c in enumerate(notebook.cells)
        if c.cell_type == "code" and len(c.source.splitlines()) > 25 and not _only_imports(c.source)
    ]
    assert not long, f"{path.name}: cells over 25 lines are hard to follow; split them: {long}"
