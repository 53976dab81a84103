"""The front door is for a reader: the README's first screen names the two commands, where to start and the whole
series; maintainer material lives in docs/, and every page the README links exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_SCREEN = 60  # lines


def first_screen_problems(readme: str, notebooks: list[str]) -> list[str]:
    """What a reader would miss in the README's first screen: the two commands, where to start, the series."""
    screen = "\n".join(readme.splitlines()[:FIRST_SCREEN])
    wanted = {"make course": "make course", "make test": "make test", "where to start": "notebook 00"}
    wanted |= {f"the series row of {name}": name for name in notebooks}
    return [what for what, text in wanted.items() if text not in screen]


def test_the_readmes_first_screen_names_the_commands_where_to_start_and_the_series():
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 9
    assert first_screen_problems((ROOT / "README.md").read_text(encoding="utf-8"), notebooks) == []


def test_a_readme_that_opens_with_maintainer_material_is_caught():
    notebooks = ["00_setup_and_data.ipynb"]
    good = "make course\nmake test\nStart with notebook 00\n| 00 | `00_setup_and_data.ipynb` |\n"
    assert first_screen_problems(good, notebooks) == []
    buried = "CI timings\n" * FIRST_SCREEN + good
    assert first_screen_problems(buried, notebooks) == [
        "make course",
        "make test",
        "where to start",
        "the series row of 00_setup_and_data.ipynb",
    ]


def test_every_page_the_readme_and_docs_link_exists():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"


def test_maintainer_material_is_in_docs_not_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    maintaining = (ROOT / "docs" / "maintaining.md").read_text(encoding="utf-8")
    for maintainer_topic in ("make test-versions", "mutmut over the library", "make test-colab", "## How we commit"):
        assert maintainer_topic not in readme and maintainer_topic in maintaining, maintainer_topic
