"""Colab, simulated: run notebooks as a new user would from a fresh Colab runtime, and check the setup cell.

`make test-colab` runs this. It builds, in a temporary folder:
- a fresh virtual environment of Colab's Python (3.13) with only what a Colab runtime has preinstalled that the
  course uses, at Colab's versions: constraints/colab-2026-08.txt (torch, torchvision, numpy, pillow, matplotlib,
  torchcodec, ipykernel, ipython; `make test-versions STACK=colab` tests the same pins);
- a folder standing in for /content (the setup cell reads COURSE_COLAB_ROOT), the working directory of the kernels;
- this checkout's tracked files as they are now (uncommitted edits included, untracked files not) in a bare git
  repository, reached by a file:// URL (COURSE_REPOSITORY_URL), so the shallow clone really runs; and that snapshot's
  tools/get_course.py as a file, which the setup cell downloads by a file:// URL where Colab's reads it from GitHub
  (the one change made to the notebooks, after checking that their setup cell is the generated one).
Then it executes notebooks 00 and 04 in the smoke profile, offline data, each in a kernel of that environment (00
clones and installs what is missing; 04 starts after that, as a second notebook in the same runtime would, and finds
the clone), and checks: every code cell ran with no error output and no stray `True`/`False`/`None` values; the
setup cell printed only its own lines; `helpers` was imported from the clone in the same kernel (no restart); pip
changed none of the preinstalled packages' versions and added no Jupyter server package and nothing of the course
itself (it runs from the clone). It ends with `colab-simulation: N passed, N failed`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # run as a script: tools.versions from this checkout
from tools.sync_notebooks import course_repository, setup_cell_source  # noqa: E402 (after the path line above)
from tools.versions import find_python, pins, stack_python_version  # noqa: E402

# Colab's runtime: its Python and what it has preinstalled that the course uses, from the constraints file.
COLAB_CONSTRAINTS = REPO_ROOT / "constraints" / "colab-2026-08.txt"
COLAB_PYTHON = stack_python_version(COLAB_CONSTRAINTS)
COLAB_RUNTIME = [f"{name}=={version}" for name, version in pins(COLAB_CONSTRAINTS).items()]
NOTEBOOKS = ["00_setup_and_data.ipynb", "04_gpu_augmentation.ipynb"]
JUPYTER_SERVER = {
    "jupyterlab",
    "jupyter-server",
    "notebook",
    "nbconvert",
    "nbclient",
    "jupyterlab-server",
    "terminado",
    "jupyter-lsp",
}
CHECK_CELL = "import helpers, sys\nprint('HELPERS', helpers.__file__)\nprint('KORNIA', 'kornia' in sys.modules)"


@dataclass
class Check:
    """One named check and what went wrong (empty when it passed)."""

    name: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing went wrong."""
        return not self.problems


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def make_runtime(folder: Path) -> Path:
    """A fresh virtual environment of Colab's Python holding only COLAB_RUNTIME; return its python."""
    interpreter = find_python(COLAB_PYTHON)
    if interpreter is None:
        raise RuntimeError(
            f"Colab runs Python {COLAB_PYTHON} and there is none here: install it (pyenv install "
            f"{COLAB_PYTHON}) or set PYTHON_{COLAB_PYTHON.replace('.', '_')} to one"
        )
    _run([interpreter, "-m", "venv", str(folder)])
    python = folder / "bin" / "python"
    # Colab's torch is the CUDA build, about 5 GB with its libraries: keep the wheels once, outside the throw-away
    # venv, so a second run downloads nothing (pip only checks the index) and installs from this folder.
    wheels = Path(os.environ.get("COURSE_COLAB_WHEELS", Path.home() / ".cache" / "feeding-the-gpu" / "colab-wheels"))
    wheels.mkdir(parents=True, exist_ok=True)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--quiet",
            "-d",
            str(wheels),
            *COLAB_RUNTIME,
        ]
    )
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "--find-links",
            str(wheels),
            *COLAB_RUNTIME,
        ]
    )
    return python


def installed(python: Path) -> dict[str, str]:
    """Distribution name (lower case) -> version, as the runtime's pip sees them."""
    listing = _run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"]).stdout
    return {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(listing)}


def publish_checkout(folder: Path) -> tuple[str, str]:
    """This checkout's tracked files as they are now, as the main branch of a bare repository, and its
    tools/get_course.py as a file beside it (GitHub serves that file raw); return both URLs."""
    snapshot = _run(["git", "stash", "create"], cwd=REPO_ROOT).stdout.strip()
    commit = snapshot or _run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT).stdout.strip()
    bare = folder / "feeding-the-gpu.git"
    _run(["git", "init", "--quiet", "--bare", str(bare)])
    _run(["git", "push", "--quiet", str(bare), f"{commit}:refs/heads/main"], cwd=REPO_ROOT)
    _run(["git", "symbolic-ref", "HEAD", "refs/heads/main"], cwd=bare)
    raw = folder / "get_course.py"
    raw.write_text(_run(["git", "show", f"{commit}:tools/get_course.py"], cwd=REPO_ROOT).stdout, encoding="utf-8")
    return bare.as_uri(), raw.as_uri()


def kernel_environment(python: Path, content: Path, url: str) -> dict[str, str]:
    """The kernels' environment: nothing of this checkout's Python, the smoke profile, offline data."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    env.update(
        {
            "PATH": f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
            "COURSE_PROFILE": "smoke",
            "COURSE_OFFLINE": "1",
            "COURSE_COLAB_ROOT": str(content),
            "COURSE_REPOSITORY_URL": url,
        }
    )
    return env


def run_notebook(
    path: Path, *, python: Path, content: Path, env: dict[str, str], script_url: str, timeout: int
) -> nbformat.NotebookNode:
    """Execute a copy of the notebook (plus CHECK_CELL) in a kernel of the runtime, cwd = content; its setup cell
    downloads get_course.py from `script_url` where the committed cell names the file on GitHub."""
    notebook = nbformat.read(path, as_version=4)
    setup = [c for c in notebook.cells if c.cell_type == "code"][1]
    if setup.source != setup_cell_source(course_repository()):
        raise RuntimeError(f"{path.name}: its setup cell is not the generated one; run `make sync-notebooks`")
    setup.source = setup_cell_source(course_repository(), script_url=script_url)
    notebook.cells.append(nbformat.v4.new_code_cell(CHECK_CELL))

    class RuntimeSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, display_name="Python 3 (Colab stand-in)", language="python")

    manager = KernelManager(kernel_spec_manager=RuntimeSpecs(), kernel_name="python3")
    client = NotebookClient(notebook, km=manager, timeout=timeout, allow_errors=True)
    try:
        client.execute(cwd=str(content), env=env)
    finally:
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
    return notebook


def check_notebook(name: str, notebook: nbformat.NotebookNode, clone: Path) -> Check:
    """Every cell ran, without errors or stray values; the setup cell is quiet; helpers came from the clone."""
    check = Check(f"{name}: runs clean from the clone")
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        if not cell.get("execution_count"):
            check.problems.append(f"code cell {index} did not run")
        for output in cell.outputs:
            if output.output_type == "error":
                check.problems.append(f"code cell {index}: {output.ename}: {output.evalue}")
            elif output.output_type == "execute_result" and output.data.get("text/plain") in {"True", "False", "None"}:
                check.problems.append(f"code cell {index} ends with an expression showing {output.data['text/plain']}")
    setup_text = "".join(o.get("text", "") for o in code[1].outputs if o.output_type == "stream")
    noise = [line for line in setup_text.splitlines() if line and not line.startswith("course setup: ")]
    if noise:
        check.problems.append(f"the setup cell printed more than its own lines: {noise[:5]}")
    final = "".join(o.get("text", "") for o in code[-1].outputs if o.output_type == "stream")
    if f"HELPERS {clone / 'helpers' / '__init__.py'}" not in final:
        check.problems.append(f"helpers was not imported from the clone {clone}: {final.strip()!r}")
    return check


def check_packages(before: dict[str, str], after: dict[str, str]) -> Check:
    """pip changed none of the preinstalled versions and added no Jupyter server package, nor the course itself."""
    check = Check("pip kept the runtime's packages and added no Jupyter server, nor the course")
    for name, version in sorted(before.items()):
        if after.get(name) != version:
            check.problems.append(f"{name} {version} became {after.get(name, 'uninstalled')}")
    server = sorted(set(after) & JUPYTER_SERVER)
    if server:
        check.problems.append(f"the course's install added Jupyter server packages: {server}")
    if "feeding-the-gpu" in set(after) - set(before):
        check.problems.append("the setup installed the course itself (feeding-the-gpu): it runs from the clone")
    return check


def simulate(work: Path, *, notebooks: list[str], timeout: int) -> list[Check]:
    """Build the runtime, the /content stand-in and the repository URL under `work`; run and check the notebooks."""
    start = time.perf_counter()
    print(f"colab simulation in {work}", flush=True)
    python = make_runtime(work / "runtime")
    version = _run([str(python), "-c", "import platform; print(platform.python_version())"]).stdout.strip()
    print(f"  runtime: Python {version}, {', '.join(COLAB_RUNTIME)} in {time.perf_counter() - start:.0f} s", flush=True)
    url, script_url = publish_checkout(work / "remote")
    content = work / "content"
    content.mkdir()
    before = installed(python)
    env = kernel_environment(python, content, url)
    checks = []
    for name in notebooks:
        began = time.perf_counter()
        executed = run_notebook(
            REPO_ROOT / "notebooks" / name,
            python=python,
            content=content,
            env=env,
            script_url=script_url,
            timeout=timeout,
        )
        nbformat.write(executed, work / f"executed-{name}")
        setup = "".join(
            o.get("text", "")
            for o in [c for c in executed.cells if c.cell_type == "code"][1].outputs
            if o.output_type == "stream"
        )
        print(
            f"  {name}: {time.perf_counter() - began:.0f} s" + "".join(f"\n    {line}" for line in setup.splitlines()),
            flush=True,
        )
        checks.append(check_notebook(name, executed, content / "feeding-the-gpu"))
        for index, cell in enumerate(c for c in executed.cells if c.cell_type == "code"):
            for output in cell.outputs:  # not a failure, but a pink box in Colab: say so
                if output.output_type == "stream" and output.name == "stderr":
                    print(f"    note: code cell {index} wrote to stderr: {output.text.strip().splitlines()[0][:150]}")
    checks.append(check_packages(before, installed(python)))
    added = sorted(set(installed(python)) - set(before))
    print(f"  added by the setup cell ({len(added)}): {', '.join(added)}", flush=True)
    print(f"  total {time.perf_counter() - start:.0f} s", flush=True)
    return checks


def main(argv: list[str] | None = None) -> int:
    """Command line: python tools/colab_sim.py [--keep] [--timeout S] [notebooks...]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (runtime, clone, executed copies)"
    )
    parser.add_argument("--timeout", type=int, default=900, help="seconds one cell may take (default 900)")
    parser.add_argument("notebooks", nargs="*", default=NOTEBOOKS, help=f"default: {' '.join(NOTEBOOKS)}")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    try:
        checks = simulate(work, notebooks=args.notebooks, timeout=args.timeout)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for check in checks:
        print(f"{'PASSED' if check.ok else 'FAILED'} {check.name}" + "".join(f"\n    {p}" for p in check.problems))
    if args.keep:
        print(f"kept: {work} (runtime/, content/, remote/, executed-*.ipynb)")
    failed = sum(not c.ok for c in checks)
    print(f"colab-simulation: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
