"""The front door is for a reader: the README's first screen names the two commands, where to start and the whole
series; maintainer material lives in docs/, and every page the README links exists. Behind it, every library module
has one test home named for it."""

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


# One test home per module (issue 34): helpers/X.py is tested in tests/test_X.py, with a class per concern there, and no
# test file is named for the review round that wrote it.
ROUND_WORDS = (
    "contract units planted edges crafted special files folders stores whole streams gone builds inputs order seeds "
    "flip crops modes routing targets machine bounds digests names resume watch readings competes errors cache preset "
    "tool"
)
ROUND_SUFFIXES = tuple(f"_{word}" for word in ROUND_WORDS.split())


def home_problems(library: list[str], test_files: list[str], modules: set[str]) -> list[str]:
    """Library modules without tests/test_<module>.py, and test files whose name ends in a review round's word (one that
    is the name of a module, as doctor_watch or sr_cache, is the module's home)."""
    problems = [
        f"helpers/{name}.py has no tests/test_{name}.py" for name in library if f"test_{name}.py" not in test_files
    ]
    for path in test_files:
        stem = path.rsplit("/", 1)[-1].removesuffix(".py").removeprefix("test_")
        if stem not in modules and stem.endswith(ROUND_SUFFIXES):
            problems.append(f"{path} is named for a review round: its tests belong in their module's file, as a class")
    return problems


def test_every_library_module_has_one_test_home_and_no_test_file_is_named_for_a_round():
    library = sorted(p.stem for p in (ROOT / "helpers").glob("*.py") if p.stem != "__init__")
    test_files = sorted(str(p.relative_to(ROOT / "tests")) for p in (ROOT / "tests").rglob("test_*.py"))
    modules = {p.stem for folder in ("helpers", "helpers/course", "tools") for p in (ROOT / folder).glob("*.*")}
    assert len(library) >= 30 and "tools/test_notebook_costs.py" in test_files
    assert home_problems(library, test_files, modules) == []


def test_a_module_without_a_home_and_a_file_named_for_a_round_are_caught():
    modules = {"doctor", "doctor_watch", "sr_cache"}
    assert home_problems(["doctor", "doctor_watch"], ["test_doctor.py", "test_doctor_watch.py"], modules) == []
    assert home_problems(["sr_cache"], ["test_sr_cache.py", "course/test_report.py"], modules) == []
    assert home_problems(["doctor", "env"], ["test_doctor.py", "test_doctor_competes.py"], modules) == [
        "helpers/env.py has no tests/test_env.py",
        "test_doctor_competes.py is named for a review round: its tests belong in their module's file, as a class",
    ]
    assert len(home_problems([], ["tools/test_notebook_costs_tool.py", "test_shards_whole.py"], modules)) == 2
