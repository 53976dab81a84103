"""`make mutate MODULES=... TESTS=...` narrows the project's [tool.mutmut] in its scratch copy: the result is still
valid TOML, the narrowed arrays hold exactly what was asked, and every other setting is the project's."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as `tomli` (pytest brings it there)
    import tomli as tomllib

from mutate import narrow  # tools/ is on the path: tests/tools/conftest.py

PYPROJECT = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()


def test_narrowing_replaces_whole_arrays_and_keeps_the_rest():
    text = narrow(PYPROJECT, "only_mutate", ["helpers/prefetch.py", "helpers/timeline.py"])
    text = narrow(text, "pytest_add_cli_args_test_selection", ["tests/test_prefetch.py"])
    narrowed = tomllib.loads(text)["tool"]["mutmut"]  # a multi-line array cut after its first line would not parse
    project = tomllib.loads(PYPROJECT)["tool"]["mutmut"]
    assert narrowed["only_mutate"] == ["helpers/prefetch.py", "helpers/timeline.py"]
    assert narrowed["pytest_add_cli_args_test_selection"] == ["tests/test_prefetch.py"]
    rest = {k: v for k, v in project.items() if k not in ("only_mutate", "pytest_add_cli_args_test_selection")}
    assert {k: narrowed[k] for k in rest} == rest and narrowed.keys() == project.keys()


def test_a_missing_setting_is_named():
    with pytest.raises(SystemExit, match="only_mutate"):
        narrow("[tool.mutmut]\nsource_paths = []\n", "only_mutate", ["helpers/x.py"])
