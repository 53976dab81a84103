#!/usr/bin/env bash
# The GPU check: one call on a bare Linux machine with an NVIDIA GPU, Python and PyTorch, and no internet, that
# verifies the course's GPU path in about 8 minutes and writes OUT_DIR/summary.json and OUT_DIR/summary.md (GPU,
# driver, torch, commit, date, every table) and OUT_DIR/logs.tar.gz.
#
#   tools/gpu_check.sh OUT_DIR [--wheelhouse DIR] [--dry-run] [--work DIR] [--budget SECONDS]
#
#   --wheelhouse DIR  install what this Python lacks from wheels made beforehand by tools/gpu_wheelhouse.sh
#                     (into WORK/site, put on PYTHONPATH: nothing is installed into the machine's Python)
#   --dry-run         for a machine without CUDA: run everything that can run (the CUDA tests are skipped and
#                     say why; the benchmarks and the training run in the smoke profile) and report what was skipped
#   --work DIR        where data, logs and checkpoints go (default: a new temporary folder)
#   --budget SECONDS  the wall time the steps are fitted into (default 480; not in a dry run): each step's time
#                     limit is cut to what is left, down to a floor; the training run gets 180 s at most
#
# What runs, all offline on the course's stand-in data (COURSE_OFFLINE=1), each under a time limit:
#   1. install from the wheelhouse (if given), then check that every package the course needs is there
#   2. the CUDA tests (pytest -m cuda, required to run: COURSE_REQUIRE_CUDA=1), the rest of the unit tests, and
#      nbval over every notebook in the smoke profile with CUDA visible, side by side where there are >= 8 cores
#   3. python -m helpers.bench sr and cifar in the full profile, one after the other, alone on the machine
#   4. python -m helpers.train cifar in the full profile (ResNet18), stopped after 3 minutes (less if the budget
#      is short) if it has not finished; it checkpoints every epoch: the summary reports the epochs that finished
# The exit status is 0 when every required step passed. Environment: PYTHON (default python3), GPU_CHECK_CORES
# (default: nproc; 8 or more runs the tests and notebooks side by side), GPU_CHECK_COMMIT
# (the commit to report where the tree is a copy without .git).
set -uo pipefail

usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-2}"
}

out="" wheelhouse="" work="" dry_run=0 budget=480
while (($#)); do
    case $1 in
        --dry-run) dry_run=1 ;;
        --wheelhouse) wheelhouse=${2:?--wheelhouse needs a folder}; shift ;;
        --work) work=${2:?--work needs a folder}; shift ;;
        --budget) budget=${2:?--budget needs seconds}; shift ;;
        -h | --help) usage 0 ;;
        -*) echo "gpu_check: unknown option $1" >&2; usage ;;
        *) [[ -z $out ]] || { echo "gpu_check: one OUT_DIR only ($out, then $1)" >&2; usage; }; out=$1 ;;
    esac
    shift
done
[[ -n $out ]] || { echo "gpu_check: name the folder for the summary: tools/gpu_check.sh OUT_DIR" >&2; usage; }

absolute() { [[ -z $1 || $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }  # folders named from the caller's folder
out=$(absolute "$out") wheelhouse=$(absolute "$wheelhouse") work=$(absolute "$work")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
python=${PYTHON:-python3}
started=$SECONDS
cd "$repo" || exit 2
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=${work:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$work/logs" && work=$(cd "$work" && pwd)
: >"$work/steps.tsv"

export COURSE_OFFLINE=1 COURSE_DATA_DIR="$work/data" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
unset COURSE_PROFILE  # each step names its profile; COURSE_PROFILE would override the benchmarks' --profile full

say() { echo "gpu_check: $*"; }

record() {  # name status exit-code seconds limit mode note: one line of WORK/steps.tsv (tools/gpu_summary.py)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/steps.tsv"
}

step() {  # step NAME LIMIT MODE NOTE -- COMMAND...: run it under `timeout` (SIGINT, then SIGKILL 30 s later)
    local name=$1 limit=$2 mode=$3 note=$4 began=$SECONDS rc status
    shift 5
    say "$name: $note (at most ${limit} s)"
    timeout -s INT --kill-after=30 "$limit" "$@" >"$work/logs/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=passed ;;
        124 | 137) status=timed-out ;;
        *) status=failed ;;
    esac
    if [[ $status == timed-out && $mode == timebox ]]; then status=time-boxed; fi
    record "$name" "$status" "$rc" "$((SECONDS - began))" "$limit" "$mode" "$note"
    say "$name: $status after $((SECONDS - began)) s (log: $work/logs/$name.log)"
}

skip() {  # skip NAME REASON
    record "$1" skipped "" 0 0 optional "$2"
    say "$1: skipped: $2"
}

limit() {  # limit RESERVE FLOOR CAP: the budget's seconds left after RESERVE for later steps, within FLOOR..CAP
    local seconds=$((budget - (SECONDS - started) - $1))
    ((dry_run || seconds > $3)) && seconds=$3  # a dry run is not fitted into the budget
    ((seconds < $2)) && seconds=$2
    echo "$seconds"
}

finish() {
    local wall=$((SECONDS - started)) rc flags=() kept=()
    ((dry_run)) && flags+=(--dry-run)
    "$python" "$here/gpu_summary.py" write --work "$work" --out "$out" --wall "$wall" "${flags[@]}"
    rc=$?
    for file in "$work"/*.xml "$work"/*.json "$work"/runs/cifar/history.json; do
        [[ -f $file ]] && kept+=("${file#"$work"/}")
    done
    tar -czf "$out/logs.tar.gz" -C "$work" logs steps.tsv "${kept[@]}"
    say "done in $wall s: $out/summary.md, $out/summary.json, $out/logs.tar.gz (work folder: $work)"
    exit "$rc"
}

# --- 0. the machine ---------------------------------------------------------------------------------------------
if ! cuda=$("$python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>"$work/logs/torch.log"); then
    say "$python cannot import torch (see $work/logs/torch.log): the GPU check needs PyTorch installed" >&2
    exit 2
fi
if ((!dry_run && !cuda)); then
    say "torch sees no CUDA device. On a GPU machine check the driver (nvidia-smi); elsewhere use --dry-run." >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi >"$work/logs/nvidia-smi.log" 2>&1
if ((dry_run)); then  # on two CPU cores the unit tests and nbval take minutes each: generous limits
    profile=smoke limit_tests=1800 limit_bench=1200 limit_train=180 require_cuda=0
    say "dry run: CUDA tests skipped where there is no GPU; benchmarks and training in the smoke profile"
else
    profile=full limit_tests=150 limit_bench=150 limit_train=180 require_cuda=1
fi
cores=${GPU_CHECK_CORES:-$(nproc 2>/dev/null || echo 1)}

# --- 1. the packages --------------------------------------------------------------------------------------------
if [[ -n $wheelhouse ]]; then
    site="$work/site"
    mapfile -t wheels < <("$python" "$here/wheelhouse.py" plan "$wheelhouse" 2>"$work/logs/plan.log")
    if ((${#wheels[@]})); then
        step install 120 required "${#wheels[@]} wheels this Python lacks, from $wheelhouse into $site" -- \
            "$python" -m pip install --no-index --no-deps --no-compile --disable-pip-version-check --target "$site" \
            "${wheels[@]}"
    else
        skip install "$python already has every package the wheelhouse holds that the check needs"
    fi
    export PYTHONPATH="$site:$PYTHONPATH"
    export JUPYTER_PATH="$site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"  # nbconvert's templates
else
    skip install "no --wheelhouse: using the packages $python has"
fi
step packages 60 required "every package the check needs is installed, versions agreeing (tools/wheelhouse.py)" -- \
    "$python" "$here/wheelhouse.py" verify
step data 120 required "the offline stand-ins in the BSDS300 and CIFAR-10 formats, in $COURSE_DATA_DIR" -- \
    "$python" -c 'from helpers.course.data import prepare_bsds300 as s, prepare_cifar10 as c
for source in (s(progress=False), c(progress=False)): print(source.describe())'
if grep -q $'^\(packages\|data\)\t\(failed\|timed-out\)' "$work/steps.tsv"; then
    say "the packages or the data are not ready: nothing else can run" >&2
    finish
fi

# --- 2. the tests and the notebooks -----------------------------------------------------------------------------
pytest_step() {  # pytest_step NAME MODE NOTE PYTEST-ARGUMENTS...
    local name=$1 mode=$2 note=$3
    shift 3
    step "$name" "$limit_tests" "$mode" "$note" -- env COURSE_PROFILE=smoke COURSE_REQUIRE_CUDA="$require_cuda" \
        "$python" -m pytest "$@" -v -p no:cacheprovider --junitxml "$work/junit-$name.xml"
}
nbval=(--nbval-lax --nbval-current-env --nbval-cell-timeout=300)
notebooks=(notebooks/[0-9][0-9]_*.ipynb)
if ((cores >= 8)); then  # side by side: the tests check results, not speed
    pytest_step cuda-tests required "the CUDA tests (pytest -m cuda)" tests -m cuda &
    xdist=()  # pytest-xdist, where installed, spreads the CPU-bound unit tests (one file per worker at a time)
    "$python" -c "import xdist" 2>/dev/null && xdist=(-n 4 --dist loadfile)
    pytest_step unit-tests optional "the other unit tests (pytest -m 'not cuda'${xdist[*]:+ ${xdist[*]}})" \
        tests -m "not cuda" "${xdist[@]}" &
    for group in 0 1 2 3; do
        mine=()
        for index in "${!notebooks[@]}"; do ((index % 4 == group)) && mine+=("${notebooks[index]}"); done
        ((${#mine[@]})) && pytest_step "nbval-$group" required "nbval, smoke profile: ${mine[*]##*/}" \
            "${mine[@]}" "${nbval[@]}" &
    done
    wait
else
    pytest_step cuda-tests required "the CUDA tests (pytest -m cuda)" tests -m cuda
    pytest_step unit-tests optional "the other unit tests (pytest -m 'not cuda')" tests -m "not cuda"
    pytest_step nbval-0 required "nbval over every notebook, smoke profile" "${notebooks[@]}" "${nbval[@]}"
fi

# --- 3. the benchmarks, alone on the machine --------------------------------------------------------------------
# reserves: the later steps' floors (cifar 90 s, training 90 s) and 10 s for the summary
step bench-sr "$(limit 190 60 "$limit_bench")" required "python -m helpers.bench sr --profile $profile" -- \
    "$python" -m helpers.bench sr --profile "$profile" --json "$work/bench-sr.json"
step bench-cifar "$(limit 100 90 "$limit_bench")" required "python -m helpers.bench cifar --profile $profile" -- \
    "$python" -m helpers.bench cifar --profile "$profile" --json "$work/bench-cifar.json"

# --- 4. the CIFAR-10 ResNet18 run, time-boxed -------------------------------------------------------------------
box=$(limit 10 90 "$limit_train")
step train-cifar "$box" timebox "python -m helpers.train cifar --profile $profile, stopped after $box s" -- \
    "$python" -m helpers.train cifar --profile "$profile" --checkpoint-dir "$work/runs/cifar"

finish
