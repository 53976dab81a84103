"""The Colab setup: the notebooks' setup cell finds or clones the course (run for real, against a fake /content and a
local git repository), and tools/colab_setup.py installs what the course needs without touching what the runtime has
(pip faked), installs nothing of the course itself, and makes `helpers` importable from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import colab_setup
from tools.sync_notebooks import setup_cell_source

STUB_SETUP = """\
import sys
def setup_course(root):
    print("STUB setup_course", root)
    sys.path.insert(0, str(root))
"""
SHOW_HELPERS = '\nimport helpers\nprint("HELPERS", helpers.__file__)\n'
SHOW_NAMES = 'print("NAMES", sorted(n for n in globals() if not n.startswith("__")))\n'


def _git(*args: str, cwd: Path) -> None:
    identity = ["-c", "user.name=course tests", "-c", "user.email=tests@localhost", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def course_remote(tmp_path) -> str:
    """A tiny course repository (helpers/ and a stub tools/colab_setup.py) served as a local git URL."""
    work = tmp_path / "upstream"
    (work / "helpers").mkdir(parents=True)
    (work / "helpers" / "__init__.py").write_text('"""the course"""\n')
    (work / "tools").mkdir()
    (work / "tools" / "colab_setup.py").write_text(STUB_SETUP)
    _git("init", "-q", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "course", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "feeding-the-gpu.git"), cwd=tmp_path)
    return (tmp_path / "feeding-the-gpu.git").as_uri()


def run_setup_cell(cwd: Path, colab_root: Path, url: str) -> subprocess.CompletedProcess[str]:
    """Execute the setup cell in a Python where the course is not importable (-I -S: no site-packages, no PYTHONPATH),
    downloading this checkout's tools/get_course.py by a file:// URL where Colab downloads it from GitHub."""
    env = {"PATH": os.environ["PATH"], "COURSE_COLAB_ROOT": str(colab_root), "COURSE_REPOSITORY_URL": url}
    script_url = (Path(__file__).resolve().parents[2] / "tools" / "get_course.py").as_uri()
    cell = setup_cell_source("https://github.com/feeding-the-gpu/feeding-the-gpu", script_url=script_url)
    source = cell + SHOW_HELPERS + SHOW_NAMES
    return subprocess.run([sys.executable, "-I", "-S", "-c", source], cwd=cwd, env=env, capture_output=True, text=True)


def test_setup_cell_clones_into_the_colab_root_and_imports_helpers_from_the_clone(tmp_path, course_remote):
    content = tmp_path / "content"
    content.mkdir()
    first = run_setup_cell(content, content, course_remote)
    assert first.returncode == 0, first.stderr
    clone = content / "feeding-the-gpu"
    lines = first.stdout.splitlines()
    assert lines[0] == f"course setup: cloning {course_remote} into {clone}"
    assert lines[1].startswith("course setup: cloned in ") and lines[1].endswith(" s")
    assert lines[2] == f"STUB setup_course {clone}"
    assert lines[3] == f"HELPERS {clone / 'helpers' / '__init__.py'}"
    assert lines[4] == "NAMES ['URL', 'helpers']"  # get_course.py leaves no name of its own in the notebook
    assert (
        subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=clone, capture_output=True, text=True
        ).stdout.strip()
        == "true"
    )
    again = run_setup_cell(content, content, course_remote)  # a second run (or a second notebook) finds the clone
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == [f"course setup: found the course at {clone}", f"STUB setup_course {clone}"]


def test_setup_cell_uses_a_checkout_above_the_working_folder(tmp_path, course_remote):
    checkout = tmp_path / "my-checkout"
    subprocess.run(["git", "clone", "-q", course_remote, str(checkout)], check=True)
    result = run_setup_cell(checkout / "helpers", tmp_path / "no-content", "file:///nowhere/feeding-the-gpu.git")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        f"course setup: found the course at {checkout}",
        f"STUB setup_course {checkout}",
    ]


def test_setup_cell_says_what_to_do_when_the_clone_fails(tmp_path):
    result = run_setup_cell(tmp_path, tmp_path / "content", (tmp_path / "missing.git").as_uri())
    assert result.returncode != 0
    assert "RuntimeError: course setup: git clone --quiet --depth 1 file://" in result.stderr
    assert f"Clone the course into {tmp_path / 'content'} yourself, or set COURSE_REPOSITORY_URL" in result.stderr


class FakePip:
    """Records pip commands (and the constraints they name) instead of running them."""

    def __init__(self, fail_with: str | None = None) -> None:
        self.commands: list[list[str]] = []
        self.constraints: list[str] = []
        self.fail_with = fail_with

    def __call__(self, command):
        command = list(command)
        self.commands.append(command)
        if "-c" in command:
            self.constraints.append(Path(command[command.index("-c") + 1]).read_text())
        if self.fail_with is not None:
            return subprocess.CompletedProcess(command, 1, stdout="", stderr=self.fail_with)
        return subprocess.CompletedProcess(command, 0, stdout="Successfully installed x", stderr="")


@pytest.fixture
def runtime(monkeypatch):
    """A Colab-like runtime: torch, numpy and friends installed, kornia and scikit-image missing."""
    installed = {
        "torch": "2.8.0+cu126",
        "torchvision": "0.23.0+cu126",
        "numpy": "2.0.2",
        "pillow": "11.3.0",
        "matplotlib": "3.10.0",
        "tqdm": "4.67.1",
        "ipython": "7.34.0",
        "ipywidgets": "7.7.1",
        "ipykernel": "6.17.1",
        "google-colab": "1.0.0",
        "weird": "not a version",
    }
    requirements = [
        "torch>=2.4",
        "torchvision>=0.19",
        "kornia>=0.7.3",
        "numpy>=1.24",
        "Pillow>=10.1",
        "scikit_image>=0.21",
        "tqdm>=4.66",
        "ipywidgets>=8.0",
        "ipython>=7.34",
    ]
    monkeypatch.setattr(colab_setup, "installed_versions", lambda: dict(installed))
    monkeypatch.setattr(colab_setup, "course_requirements", lambda root: requirements)
    return installed


def test_installs_only_what_is_missing_and_nothing_of_the_course_itself(runtime, tmp_path, capsys):
    pip = FakePip()
    lines = colab_setup.install_course(tmp_path, runner=pip)
    (command,) = pip.commands  # one pip run: no `pip install -e` of the course (it runs from the checkout)
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert command[-2:] == ["kornia>=0.7.3", "scikit_image>=0.21"]  # nothing the runtime has is asked for
    assert str(tmp_path) not in command and "-e" not in command
    pins = pip.constraints[0].splitlines()
    assert {"torch==2.8.0+cu126", "numpy==2.0.2", "ipykernel==6.17.1", "ipywidgets==7.7.1"} <= set(pins)
    assert not any(p.startswith("weird") for p in pins)  # a version pip could not read is left out, not guessed
    assert lines[0].startswith("kept as this Python has them: torch 2.8.0+cu126, torchvision 0.23.0+cu126, numpy")
    assert "ipywidgets 7.7.1" in lines[0]  # older than the course asks, and kept: nothing of the runtime changes
    assert lines[1].startswith("installed kornia, scikit_image (") and lines[1].endswith(" s")
    assert capsys.readouterr().out.count("course setup: ") == 2


def test_nothing_is_installed_when_everything_is_there(runtime, tmp_path):
    runtime.update({"kornia": "0.8.1", "scikit-image": "0.25.2"})
    pip = FakePip()
    lines = colab_setup.install_course(tmp_path, runner=pip)
    assert pip.commands == [] and lines[-1] == "nothing else to install"


def test_a_pip_failure_shows_the_end_of_its_output_and_the_command(runtime, tmp_path):
    noise = "\n".join(f"pip line {i}" for i in range(100)) + "\nERROR: No matching distribution found for kornia"
    with pytest.raises(RuntimeError) as failure:
        colab_setup.install_course(tmp_path, runner=FakePip(fail_with=noise))
    message = str(failure.value)
    assert "installing kornia, scikit_image failed" in message and "pip exit code 1" in message
    assert "ERROR: No matching distribution found for kornia" in message and "pip line 99" in message
    assert "pip line 50" not in message  # only the tail
    command = message.splitlines()[-1].strip()
    assert command.startswith(f"{sys.executable} -m pip install --disable-pip-version-check -c ")
    assert command.endswith(" 'kornia>=0.7.3' 'scikit_image>=0.21'")
    constraints = Path(command.split(" -c ")[1].split()[0])
    assert "torch==2.8.0+cu126" in constraints.read_text()  # the command shown can be run by hand: its pins are kept
    shutil.rmtree(constraints.parent)


def test_requirement_names_and_canonical_names():
    assert colab_setup.requirement_name("scikit-image>=0.21; python_version >= '3.10'") == "scikit-image"
    assert colab_setup.requirement_name("Pillow") == "Pillow"
    assert colab_setup.canonical("Scikit_Image") == colab_setup.canonical("scikit.image") == "scikit-image"
    missing = colab_setup.missing_requirements(["Pillow>=10", "kornia"], {"pillow": "11.0"})
    assert missing == ["kornia"]
    with pytest.raises(ValueError, match="cannot read a package name"):
        colab_setup.requirement_name(">=1.0")


PYPROJECT = """\
[project]
name = "feeding-the-gpu"
dependencies = ["torch>=2.4", "tqdm"]

[project.optional-dependencies]
library = ["kornia>=0.7.4"]
jupyter = ["jupyterlab>=4.0"]
course = [
    "kornia>=0.7.4",
    "matplotlib>=3.7",
    "ipython; python_version >= '3.10'",
    "TQDM>=4.66",  # the base list has it: asked for once
]
test = ["pytest>=7.4"]
"""


def test_the_requirements_are_read_from_the_checkouts_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert colab_setup.base_requirements(tmp_path) == ["torch>=2.4", "tqdm"]
    assert colab_setup.extra_requirements("course", tmp_path) == [
        "kornia>=0.7.4",
        "matplotlib>=3.7",
        "ipython; python_version >= '3.10'",
        "TQDM>=4.66",
    ]
    assert colab_setup.course_requirements(tmp_path) == [
        "torch>=2.4",
        "tqdm",
        "kornia>=0.7.4",
        "matplotlib>=3.7",
        "ipython; python_version >= '3.10'",
    ]
    with pytest.raises(RuntimeError, match="declares no extra 'gpu'"):
        colab_setup.extra_requirements("gpu", tmp_path)
    with pytest.raises(RuntimeError, match="cannot read the course's dependencies from"):
        colab_setup.base_requirements(tmp_path / "elsewhere")


def test_this_checkouts_requirements_are_what_the_notebooks_import():
    """Read from this checkout's pyproject.toml: the library, kornia, plotting; no Jupyter server, no test tools."""
    root = Path(__file__).resolve().parents[2]
    names = {colab_setup.canonical(colab_setup.requirement_name(r)) for r in colab_setup.course_requirements(root)}
    assert {"torch", "torchvision", "numpy", "pillow", "psutil", "kornia", "matplotlib", "scikit-image"} <= names
    assert not names & {"jupyterlab", "nbconvert", "pytest"}


def test_setup_course_refuses_a_folder_that_is_not_the_course(tmp_path):
    with pytest.raises(RuntimeError, match=f"{tmp_path} is not the course repository"):
        colab_setup.setup_course(tmp_path)


def test_setup_course_makes_the_course_importable_here_and_in_subprocesses(runtime, tmp_path, monkeypatch, capsys):
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    pip = FakePip()
    monkeypatch.setattr(colab_setup, "_run", pip)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    colab_setup.setup_course(tmp_path)
    assert sys.path[0] == str(tmp_path)
    assert os.environ["PYTHONPATH"] == os.pathsep.join([str(tmp_path), "/elsewhere"])
    assert all("-e" not in command for command in pip.commands)
    assert capsys.readouterr().out.splitlines()[-1].startswith("course setup: ready in ")
    colab_setup.setup_course(tmp_path)  # a second notebook in the same runtime: the paths are not doubled
    assert sys.path.count(str(tmp_path)) == 1 and os.environ["PYTHONPATH"].count(str(tmp_path)) == 1
    child = subprocess.run(
        [sys.executable, "-c", "import helpers; print(helpers.__file__)"],
        cwd=tmp_path.parent,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert child.stdout.strip() == str(tmp_path / "helpers" / "__init__.py"), child.stderr
