"""JupyterLab as a user meets it: Lab from the course environment, Debian's Chromium driven by Playwright, two
notebooks opened and Run All; the course kernel ran every cell without an error. `make test-lab` runs it (CI too);
`make test` skips it. A screenshot of each notebook goes to reports/lab-<notebook>.png for the person reading CI."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
REPORTS = REPO_ROOT / "reports"
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
NOTEBOOKS = ["00_setup_and_data.ipynb", "04_gpu_augmentation.ipynb"]
BROKEN = "checks/broken.ipynb"  # made by the fixture: shows that the checks catch a failing notebook
# `make lab` opens Lab at the repository root showing notebooks/: the test server uses the same default URL.
DEFAULT_URL = re.search(r"--LabApp.default_url=(\S+)", (REPO_ROOT / "Makefile").read_text()).group(1)
RUN_BOUND_S = 900  # Run All of one notebook in the smoke profile: about a minute here; this is the bound
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

pytestmark = pytest.mark.skipif(
    os.environ.get("COURSE_LAB_TEST") != "1", reason="the JupyterLab browser test runs from `make test-lab`"
)

# The notebook panel of `path`, found among Lab's main-area widgets (window.jupyterapp: --LabApp.expose_app_in_browser).
FIND_PANEL = (
    "path => Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.context && w.context.path === path)"
)
STATE = (
    """async path => {
  const panel = (%s)(path);
  const cells = [];
  const model = panel.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') continue;
    const outputs = [];
    for (let j = 0; j < cell.outputs.length; j++) outputs.push(cell.outputs.get(j).toJSON());
    cells.push({count: cell.executionCount, outputs});
  }
  const session = panel.sessionContext.session;
  return {cells, kernel: session && session.kernel ? session.kernel.name : null,
          status: session && session.kernel ? session.kernel.status : null,
          display: panel.sessionContext.kernelDisplayName, done: window.__runAllDone === path};
}"""
    % FIND_PANEL
)
RUN_ALL = (
    """async path => {
  const panel = (%s)(path);
  window.jupyterapp.shell.activateById(panel.id);
  await panel.sessionContext.ready;
  window.__runAllDone = null;
  window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => { window.__runAllDone = path; });
}"""
    % FIND_PANEL
)
ASK_KERNEL = (
    """async ([path, code]) => {
  const panel = (%s)(path);
  const future = panel.sessionContext.session.kernel.requestExecute({code, store_history: false});
  let text = '';
  future.onIOPub = msg => { if (msg.header.msg_type === 'stream') text += msg.content.text; };
  await future.done;
  return text;
}"""
    % FIND_PANEL
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback only)
        return json.load(response)


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.is_file():
        pytest.skip(f"Chromium is not at {CHROMIUM} and could not be installed (.ci/run: apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab from this environment on 127.0.0.1 with a token, serving copies of the notebooks (Lab's autosave
    must not write outputs into the committed ones), smoke profile, offline data; settings and kernels of the user's
    own Jupyter left out."""
    root = tmp_path_factory.mktemp("lab")
    (root / "notebooks").mkdir()
    for name in NOTEBOOKS:
        shutil.copy(REPO_ROOT / "notebooks" / name, root / "notebooks" / name)
    broken = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    broken.cells = [nbformat.v4.new_code_cell(s) for s in ["x = 1", "raise ValueError('broken on purpose')", "y = 2"]]
    (root / Path(BROKEN).parent).mkdir()
    nbformat.write(broken, root / BROKEN)
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "JUPYTER"))}
    env.update({"COURSE_PROFILE": "smoke", "COURSE_OFFLINE": "1"})
    # the kernels import the course from this checkout, as under `make lab` (the notebooks here are copies elsewhere)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    for variable, folder in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
    ]:
        env[variable] = str(tmp_path_factory.mktemp(folder))
    notification = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)  # no "fetch Jupyter news?" toast over the screenshots, no request for it
    (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url={DEFAULT_URL}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = open(root / "lab.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            _get_json(f"{base}/api/status?token={token}")
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start within 90 s: {(root / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
    yield {"base": base, "token": token, "root": root}
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()


@pytest.fixture(scope="module")
def page(chromium, lab):
    from playwright.sync_api import sync_playwright  # the `browser` extra: installed by `make test-lab`

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        browser.close()


def _wait_for_run(page, path: str) -> dict:
    deadline, settled = time.monotonic() + RUN_BOUND_S, 0
    while time.monotonic() < deadline:
        state = page.evaluate(STATE, path)
        settled = settled + 1 if state["done"] and state["status"] == "idle" else 0
        if settled >= 2:
            return state
        time.sleep(1)
    pytest.fail(f"{path}: Run All did not finish within {RUN_BOUND_S} s (kernel {state['status']})")


def test_lab_opens_showing_the_notebooks_folder(page, lab):
    page.goto(f"{lab['base']}/?token={lab['token']}")
    page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-DirListing-item')", timeout=120_000)
    page.wait_for_function("() => document.querySelector('.jp-BreadCrumbs').innerText.includes('notebooks')")
    listed = page.locator(".jp-DirListing-itemText").all_inner_texts()
    assert sorted(listed) == sorted(NOTEBOOKS), f"the file browser shows {listed}, not the notebooks folder"


def open_and_run_all(page, lab, path: str) -> dict:
    """Open `path` in Lab, wait for its kernel, Run All, wait until done and idle; return the notebook's state."""
    page.goto(f"{lab['base']}/lab/tree/{path}?token={lab['token']}")
    page.wait_for_function(f"() => window.jupyterapp && ({FIND_PANEL})({json.dumps(path)})", timeout=120_000)
    page.wait_for_function(
        f"() => {{ const p = ({FIND_PANEL})({json.dumps(path)}); return p.sessionContext.session && "
        "p.sessionContext.session.kernel && p.sessionContext.session.kernel.status === 'idle'; }",
        timeout=120_000,
    )
    assert page.locator(".jp-Dialog").count() == 0, "Lab asked which kernel to use: the course kernel was not chosen"
    page.evaluate(RUN_ALL, path)
    state = _wait_for_run(page, path)
    state["panel"] = page.evaluate(f"path => ({FIND_PANEL})(path).id", path)
    return state


def problems(state: dict) -> tuple[list[int], list[str], list[int]]:
    """(code cells without an execution count, error outputs, cells whose stderr holds a traceback)."""
    not_run = [i for i, cell in enumerate(state["cells"]) if cell["count"] is None]
    errors = [
        f"cell {i}: {o['ename']}: {o['evalue']}"
        for i, cell in enumerate(state["cells"])
        for o in cell["outputs"]
        if o["output_type"] == "error"
    ]
    tracebacks = [
        i
        for i, cell in enumerate(state["cells"])
        for o in cell["outputs"]
        if o.get("name") == "stderr" and "Traceback" in "".join(o.get("text", ""))
    ]
    return not_run, errors, tracebacks


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_run_all_in_jupyterlab_with_the_course_kernel(page, lab, name):
    path = f"notebooks/{name}"
    state = open_and_run_all(page, lab, path)
    REPORTS.mkdir(exist_ok=True)
    page.screenshot(path=str(REPORTS / f"lab-{Path(name).stem}.png"))

    specs = _get_json(f"{lab['base']}/api/kernelspecs?token={lab['token']}")
    assert state["kernel"] == specs["default"], f"{name}: kernel {state['kernel']}, not this environment's default"
    assert state["display"] == specs["kernelspecs"][state["kernel"]]["spec"]["display_name"]
    assert page.locator(f"#{state['panel']} .jp-Toolbar-kernelName").inner_text().strip() == state["display"]
    where = page.evaluate(ASK_KERNEL, [path, "import sys, helpers\nprint(sys.executable)\nprint(helpers.__file__)"])
    executable, helpers_file = where.split()
    assert executable == sys.executable, f"{name}: the kernel runs {executable}, not the course's {sys.executable}"
    assert Path(helpers_file) == REPO_ROOT / "helpers" / "__init__.py"

    not_run, errors, tracebacks = problems(state)
    assert not errors, f"{name}: error output in Lab: {errors}"
    assert not not_run, f"{name}: code cells {not_run} have no execution count after Run All"
    assert not tracebacks, f"{name}: tracebacks printed to stderr in cells {tracebacks}"
    shown = page.locator(f'#{state["panel"]} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    assert "Traceback" not in " ".join(shown.all_inner_texts())


def test_the_checks_see_a_broken_notebook(page, lab):
    """The same checks on a notebook that fails on purpose: they must report it (a test that cannot fail is none)."""
    state = open_and_run_all(page, lab, BROKEN)
    not_run, errors, _ = problems(state)
    assert errors == ["cell 1: ValueError: broken on purpose"] and not_run == [2]
