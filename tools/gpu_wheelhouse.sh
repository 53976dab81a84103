#!/usr/bin/env bash
# Download, on a machine that reaches the package index, the wheels a GPU machine without internet needs to run
# the GPU check (tools/gpu_check.sh): everything the course and the check import beyond torch, torchvision and numpy
# (which the machine has: tools/wheelhouse.py's BASELINE), pillow, matplotlib, scikit-image, kornia and its compiled
# part kornia_rs, nvidia-ml-py, nbval, nbclient, nbconvert, nbformat, ipykernel, pytest, tqdm, and every dependency
# of those (less the few nothing imports: tools/wheelhouse.py's UNUSED), for CPython 3.12 on manylinux x86-64. The
# wheelhouse is checked (one version per project, no requirement left out, under 60 MiB: it travels in a device
# session's 64 MiB carry) and its size printed: 70 wheels, 52.4 MiB on 2026-12-01.
#
#   tools/gpu_wheelhouse.sh [DIR]          DIR defaults to .whl/ in the repository (git-ignored)
#
# Environment: PYTHON (default python3; any Python with pip and `packaging`, 3.11 or newer),
# WHEELHOUSE_PYTHON_VERSION (default 3.12: the GPU machine's Python).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
dir=${1:-$repo/.whl}
python=${PYTHON:-python3}
python_version=${WHEELHOUSE_PYTHON_VERSION:-3.12}
platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)

if [[ -d $dir ]] && find "$dir" -mindepth 1 ! \( -type f -name '*.whl' \) -print -quit | grep -q .; then
    echo "gpu_wheelhouse: $dir holds files other than wheels; name an empty or wheel-only folder" >&2
    exit 2
fi
staging=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse.XXXXXX")
trap 'rm -rf "$staging"' EXIT

download() {
    local platform_args=()
    for platform in "${platforms[@]}"; do platform_args+=(--platform "$platform"); done
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version "$python_version" --implementation cp "${platform_args[@]}" --dest "$staging" "$@"
}

wheelhouse() { "$python" "$here/wheelhouse.py" "$@"; }

mapfile -t wanted < <(wheelhouse roots)
echo "gpu_wheelhouse: downloading ${wanted[*]} and their dependencies for CPython $python_version (manylinux x86-64)"
download "${wanted[@]}"
for _ in 1 2 3 4 5 6 7 8 9 10; do
    mapfile -t still < <(wheelhouse missing "$staging" --python-version "$python_version")
    [[ ${#still[@]} -eq 0 ]] && break
    echo "gpu_wheelhouse: and ${still[*]}"
    download "${still[@]}"
done
wheelhouse check "$staging" --python-version "$python_version"

mkdir -p "$dir"
rm -f "$dir"/*.whl
mv "$staging"/*.whl "$dir"/
echo "gpu_wheelhouse: $dir: $(find "$dir" -maxdepth 1 -type f -name '*.whl' | wc -l) wheels, $(du -sh "$dir" | cut -f1) on disk"
echo "gpu_wheelhouse: on the GPU machine: tools/gpu_check.sh OUT_DIR --wheelhouse $dir"
