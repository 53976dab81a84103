"""Each profile's time budgets fit the limit the course runner gives every notebook (`notebook_limit_s`), with room
left for what no budget bounds (preparing data, building loaders, calibrating, evaluating)."""

import re
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from helpers.course.profiles import PROFILES, Profile

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SPARE = 0.25  # the share of the limit the budgets must leave to the unbudgeted work

Times = int | Callable[[Profile], int]
# What each notebook spends, read from its cells: (budget field, how many times it is spent). A ladder spends its
# turn once per rung per round; 05 trains a second recipe (x2) in the full profile.
SPENDS: dict[str, list[tuple[str, Times]]] = {
    "01": [("pipeline_budget_s", 1), ("doctor_budget_s", 2)],
    "02": [("ladder_turn_s", lambda p: 5 * p.ladder_rounds)],  # 5 rungs
    "03": [("precision_budget_s", 3)],  # fp32, bf16, fp16
    "04": [("ladder_turn_s", lambda p: 4 * p.ladder_rounds)],  # 4 rungs
    "05": [("sr.budget_s", lambda p: 2 if p.name == "full" else 1), ("pipeline_budget_s", 2)],
    "06": [("pipeline_budget_s", 2), ("cifar.budget_s", 1)],
    "07": [("ladder_turn_s", lambda p: 5 * p.ladder_rounds)],  # 5 rungs
    "08": [("pipeline_budget_s", 3)],
}


def _budget_fields() -> set[str]:
    """Every field of a Profile that is a time budget: `*_budget_s`, a ladder's turn, the recipes' budgets."""
    names = {name for name in Profile.__dataclass_fields__ if name.endswith(("budget_s", "turn_s"))}
    return names | {"sr.budget_s", "cifar.budget_s"}


def _value(profile: Profile, field: str) -> float:
    """The field's seconds in `profile` (a recipe without a budget runs a fixed step count: no time budget)."""
    value: object = profile
    for part in field.split("."):
        value = getattr(value, part)
    return float(value or 0)  # type: ignore[arg-type]


def spent_s(profile: Profile, notebook: str) -> float:
    """The seconds of budget `notebook` spends in `profile`."""
    return sum(_value(profile, f) * (n(profile) if callable(n) else n) for f, n in SPENDS[notebook])


def _code(number: str) -> str:
    """The code cells of notebook `number`, joined."""
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    return "\n".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code")


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("notebook", sorted(SPENDS))
def test_budgets_fit_the_notebook_limit_with_room_to_spare(name: str, notebook: str) -> None:
    profile = PROFILES[name]
    allowed = (1 - SPARE) * profile.notebook_limit_s
    assert spent_s(profile, notebook) <= allowed, (
        f"{notebook} in the {name} profile spends {spent_s(profile, notebook):g} s of budgets; its limit "
        f"{profile.notebook_limit_s} s leaves {allowed:g} s after {SPARE:.0%} for the unbudgeted work"
    )


@pytest.mark.parametrize("notebook", sorted(SPENDS))
def test_the_table_lists_the_budgets_each_notebook_reads(notebook: str) -> None:
    code = _code(notebook)
    read = {f for f in _budget_fields() if "." not in f and re.search(rf"PROFILE\.{f}\b", code)}
    read |= {f"{r}.budget_s" for r in ("sr", "cifar") if re.search(rf"PROFILE\.{r}\b", code)}
    assert read == {field for field, _ in SPENDS[notebook]}


def test_every_budget_field_is_spent_somewhere() -> None:
    assert _budget_fields() == {field for spends in SPENDS.values() for field, _ in spends}


def test_every_notebook_with_a_budget_is_in_the_table() -> None:
    numbers = {p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    assert {
        n for n in numbers if any(re.search(rf"PROFILE\.{f.split('.')[0]}\b", _code(n)) for f in _budget_fields())
    } <= set(SPENDS)


def test_a_budget_past_the_limit_fails() -> None:
    """The check above compares real numbers: a full-profile SR budget as long as the limit does not fit."""
    import dataclasses

    full = PROFILES["full"]
    raised = dataclasses.replace(full, sr=dataclasses.replace(full.sr, budget_s=full.notebook_limit_s))
    assert spent_s(raised, "05") > (1 - SPARE) * raised.notebook_limit_s
