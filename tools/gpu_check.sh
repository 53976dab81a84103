#!/usr/bin/env bash
# The GPU check: one call on a bare Linux machine with an NVIDIA GPU, Python, torch and torchvision, and no internet,
# that verifies the course's GPU path within a budget of 9 minutes (default) and writes OUT_DIR/summary.json and
# OUT_DIR/summary.md (GPU, driver, torch, commit, date, every step with its outcome, every failure with its traceback,
# every table), with each step's log in OUT_DIR/logs/ and its JUnit XML in OUT_DIR/junit/. The summary is rewritten
# after every step, so a run stopped from outside still leaves one.
#
#   tools/gpu_check.sh OUT_DIR [--wheelhouse DIR] [--rehearsal] [--work DIR] [--budget SECONDS] [--plan]
#
#   --wheelhouse DIR  install what this Python lacks from wheels made beforehand by tools/gpu_wheelhouse.sh
#                     (into WORK/site, put on PYTHONPATH: nothing is installed into the machine's Python)
#   --rehearsal       the whole script on a machine without CUDA (CUDA is hidden even where there is one): every
#                     step runs, the CUDA ones on the CPU in the smoke profile, and those are reported as skipped,
#                     never as passed (--dry-run is its old name). CI runs it: `make gpu-rehearsal`.
#   --work DIR        where data, the installed wheels and checkpoints go (default: a new temporary folder)
#   --budget SECONDS  the wall time every step is fitted into (default 560; a rehearsal is not fitted, each step
#                     has its own limit): a step's limit is cut to what the budget leaves after the steps behind it,
#                     and a step that cannot get its floor is not run and says so
#   --plan            print the steps (name, mode, CPU or CUDA, limit, what) and stop: nothing runs
#
# A session lent a GPU (one H200, 15 minutes of device time in all, at most 10 minutes a command) runs it in ONE call,
# after building the wheelhouse here (tools/gpu_wheelhouse.sh .whl: about 53 MiB of the carry's 64):
#
#   run(command="tools/gpu_check.sh \"$OUT/gpu-check\" --wheelhouse .whl", carry=[".whl"], timeout_s=600)
#
# then, back here, with the files that came back: python tools/gpu_summary.py publish FILES_AT/gpu-check, and commit
# results/<gpu>-<date>.{json,md}. The 560-s budget leaves 40 s of the 600 s to spare; a run stopped from outside
# still leaves its summary (rewritten after every step, and once more on SIGTERM).
#
# What runs, all offline on the course's stand-in data (COURSE_OFFLINE=1), each under a time limit:
#   0. the machine: torch and CUDA; a host C compiler that builds against Python.h (Triton compiles its kernel
#      launchers with one: without it no torch.compile row is promised, and the speed-ups say why)
#   1. install from the wheelhouse (if given), then check that every package the check needs is there (torch,
#      torchvision and numpy are the machine's), then prepare the stand-in data
#   2. the CUDA tests (tests/cuda, required to run: COURSE_REQUIRE_CUDA=1) and nbval over each notebook in a
#      process of its own (smoke profile, CUDA visible), several at once where there are cores for it: a notebook
#      that fails, hangs or kills its kernel is recorded with its traceback and the others still run
#   3. python -m helpers.course.bench sr and cifar in the full profile, one after the other, alone on the machine
#   4. the step-side speed-ups (tools/gpu_speedups.py, full profile), torch.compile rows only with a C compiler
#   5. python -m helpers.course.train cifar in the full profile (ResNet18), time-boxed; it checkpoints every epoch: the
#      summary reports the epochs that finished
# The exit status is 0 when every required step passed (in a rehearsal: ran without error). Environment: PYTHON
# (default python3), GPU_CHECK_CORES (default: nproc), GPU_CHECK_COMMIT (the commit to report where the tree is a
# copy without .git), GPU_CHECK_NOTEBOOKS (a pattern such as '0[0-2]', to run fewer notebooks: tests only; the
# summary then lists the others as not run).
set -uo pipefail

usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-2}"
}

out="" wheelhouse="" work="" rehearsal=0 budget=560 plan_only=0
while (($#)); do
    case $1 in
        --rehearsal | --dry-run) rehearsal=1 ;;
        --plan) plan_only=1 ;;
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
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget takes whole seconds, not $budget" >&2; usage; }

absolute() { [[ -z $1 || $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }  # folders named from the caller's folder
out=$(absolute "$out") wheelhouse=$(absolute "$wheelhouse") work=$(absolute "$work")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
python=${PYTHON:-python3}
started=$SECONDS
cd "$repo" || exit 2

export COURSE_OFFLINE=1 PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
unset COURSE_PROFILE  # each step names its profile; COURSE_PROFILE would override the benchmarks' --profile full
((rehearsal)) && export CUDA_VISIBLE_DEVICES=""  # a rehearsal measures nothing on a GPU, even where there is one

say() { echo "gpu_check: $*"; }

# --- the plan: every step has a limit (its cap, cut to the budget; under 20 s it is not started), a mode (required:
# must pass; optional: a failure counts, running out of time does not; timebox: stopping at the limit is the plan)
# and whether it checks CUDA (a rehearsal reports those as skipped, never as passed)
cores=${GPU_CHECK_CORES:-$(nproc 2>/dev/null || echo 1)}
notebooks=()
for path in notebooks/[0-9][0-9]_*.ipynb; do
    [[ -n ${GPU_CHECK_NOTEBOOKS:-} && ${path##*/} != ${GPU_CHECK_NOTEBOOKS}_* ]] && continue
    notebooks+=("$path")
done
if ((rehearsal)); then  # two shared CPU cores: generous limits, one step at a time
    profile=smoke require_cuda=0 parallel=1
    cap_tests=900 cap_notebook=600 cap_bench=600 cap_speedups=300 cap_train=300
else
    profile=full require_cuda=1 parallel=$((cores >= 16 ? 4 : cores >= 8 ? 3 : 1))
    cap_tests=200 cap_notebook=180 cap_bench=90 cap_speedups=60 cap_train=75
fi
# seconds the steps after phase 2 need at their caps, and the summary's own
reserve_summary=15
reserve_late=$((2 * cap_bench + cap_speedups + cap_train + reserve_summary))

if ((plan_only)); then  # the same steps as a run, printed instead of run, in a folder that is thrown away
    out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-plan.XXXXXX") work=$out
    trap 'rm -rf "$out"' EXIT
    echo "parallel: $parallel at once in phase 2; budget: $( ((rehearsal)) && echo none || echo "$budget s")"
fi
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=${work:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$work" && work=$(cd "$work" && pwd)
logs="$out/logs" junit="$out/junit"
rm -rf "$logs" "$junit" "$out"/summary.{json,md} "$out"/bench-*.json "$out"/{speedups,machine}.json
mkdir -p "$logs" "$junit"
export COURSE_DATA_DIR="$work/data"
: >"$out/steps.tsv"
: >"$work/running"  # every step started (its `timeout`'s pid first), for a stop from outside

record() {  # name status exit-code seconds limit mode note needs: one line of OUT/steps.tsv (tools/gpu_summary.py)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out/steps.tsv"
}

summarise() {  # rewrite the summary from what has finished so far (quietly; the last one speaks)
    ((plan_only)) && return
    local flags=()
    ((rehearsal)) && flags+=(--rehearsal)
    "$python" "$here/gpu_summary.py" write --work "$work" --out "$out" --wall "$((SECONDS - started))" \
        "${flags[@]}" "$@"
}

left() { echo $((budget - (SECONDS - started))); }  # seconds of the budget left

fit() {  # fit CAP RESERVE: the cap, cut to the budget left after RESERVE seconds for later steps (not in a rehearsal)
    local seconds=$(($(left) - $2))
    ((rehearsal || seconds > $1)) && seconds=$1
    echo "$seconds"
}

step() {  # step NAME LIMIT MODE NEEDS NOTE -- COMMAND...: run it under `timeout` (SIGINT, then SIGKILL 10 s later)
    local name=$1 limit=$2 mode=$3 needs=$4 note=$5 began=$SECONDS rc status
    shift 6
    if ((plan_only)); then
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$needs" "$limit" "$note"
        return
    fi
    if ((limit < 20)); then
        record "$name" not-run "" 0 "$limit" "$mode" "not started: $limit s of the budget were left for it ($note)" "$needs"
        say "$name: not run: only $limit s of the budget left"
        return
    fi
    say "$name: $note (at most ${limit} s)"
    # in the background, so that a TERM from outside is handled at once (bash runs a trap only between commands)
    timeout -s INT --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1 &
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' $! "$name" "$began" "$limit" "$mode" "$needs" >>"$work/running"
    wait $!
    rc=$?
    case $rc in
        0) status=passed ;;
        124 | 137) status=timed-out ;;
        130 | 143) status=failed note="$note; stopped from outside" ;;
        5) status=failed note="$note; pytest collected no test (exit status 5)" ;;
        *) status=failed ;;
    esac
    if [[ $status == timed-out && $mode == timebox ]]; then status=time-boxed; fi
    if ((rehearsal)) && [[ $needs == cuda && $status =~ ^(passed|time-boxed)$ ]]; then
        status=skipped note="$note; no CUDA (a rehearsal): ran on the CPU without error, nothing checked on a GPU"
    fi
    record "$name" "$status" "$rc" "$((SECONDS - began))" "$limit" "$mode" "$note" "$needs"
    say "$name: $status after $((SECONDS - began)) s (log: $logs/$name.log)"
}

skip() {  # skip NAME NEEDS REASON
    ((plan_only)) && { printf '%s\t%s\t%s\t%s\t%s\n' "$1" optional "$2" 0 "skipped: $3"; return; }
    record "$1" skipped "" 0 0 optional "$3" "$2"
    say "$1: skipped: $3"
}

finish() {
    trap - INT TERM
    ((plan_only)) && exit 0
    local rc
    summarise --final
    rc=$?
    say "done in $((SECONDS - started)) s: $out/summary.md, $out/summary.json, logs in $out/logs (work folder: $work)"
    exit "$rc"
}

stopped() {  # INT or TERM from outside: stop the running steps, keep what finished, write the summary
    trap - INT TERM
    say "stopped from outside after $((SECONDS - started)) s: writing the summary of what finished" >&2
    local pid name began limit mode needs
    while IFS=$'\t' read -r pid _; do kill -TERM "$pid" 2>/dev/null; done <"$work/running"  # `timeout` passes it on
    wait  # steps running side by side in the background record themselves as stopped
    while IFS=$'\t' read -r pid name began limit mode needs; do  # the one this shell was waiting for
        grep -q "^$name"$'\t' "$out/steps.tsv" ||
            record "$name" failed 143 $((SECONDS - began)) "$limit" "$mode" "stopped from outside" "$needs"
    done <"$work/running"
    record interrupted failed "" 0 0 required "the check was stopped from outside before it finished" cpu
    finish
}
trap stopped INT TERM

# --- 0. the machine ---------------------------------------------------------------------------------------------
if ((plan_only)); then
    cuda=1
elif ! cuda=$("$python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>"$logs/torch.log"); then
    say "$python cannot import torch (see $logs/torch.log): the GPU check needs PyTorch installed" >&2
    exit 2
fi
if ((!rehearsal && !cuda)); then
    say "torch sees no CUDA device. On a GPU machine check the driver (nvidia-smi); elsewhere use --rehearsal." >&2
    exit 2
fi
((!plan_only)) && command -v nvidia-smi >/dev/null && nvidia-smi >"$logs/nvidia-smi.log" 2>&1
((rehearsal && !plan_only)) && say "rehearsal: CUDA hidden; the CUDA steps run on the CPU in the smoke profile and count as skipped"

# Triton builds each kernel's launcher with the host C compiler it finds as $CC, gcc or clang, against Python.h
compiler="" compiler_reason=""
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
for candidate in "${CC:-}" gcc clang; do
    [[ -n $candidate ]] && command -v "$candidate" >/dev/null || continue
    if printf '#include <Python.h>\nint main(void) { return 0; }\n' |
        timeout 30 "$candidate" -x c - -I"$include" -o "$work/compiler-test" >>"$logs/compiler.log" 2>&1; then
        compiler=$(command -v "$candidate")
        break
    fi
    compiler_reason="$candidate cannot build a program that includes Python.h (see logs/compiler.log)"
done
if ((plan_only)); then
    step compiler 30 optional cpu "a host C compiler that builds against Python.h (Triton needs one)" -- true
elif [[ -n $compiler ]]; then
    record compiler passed 0 0 30 optional "host C compiler $compiler builds against Python.h, as Triton needs: torch.compile is tried" cpu
else
    compiler_reason=${compiler_reason:-"no host C compiler (\$CC, gcc or clang)"}
    skip compiler cpu "$compiler_reason: Triton needs one, so no torch.compile row is timed"
fi

# --- 1. the packages and the data -------------------------------------------------------------------------------
if [[ -n $wheelhouse ]]; then
    site="$work/site"
    wheels=(the-wheels-this-python-lacks)
    ((plan_only)) || mapfile -t wheels < <("$python" "$here/wheelhouse.py" plan "$wheelhouse" 2>"$logs/plan.log")
    if ((${#wheels[@]})); then
        step install "$(fit 120 $((reserve_late + 60)))" required cpu "${#wheels[@]} wheels this Python lacks, from $wheelhouse into $site" -- \
            "$python" -m pip install --no-index --no-deps --no-compile --disable-pip-version-check --target "$site" \
            "${wheels[@]}"
    else
        skip install cpu "$python already has every package the wheelhouse holds that the check needs"
    fi
    export PYTHONPATH="$site:$PYTHONPATH"
    export JUPYTER_PATH="$site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"  # nbconvert's templates
    export PATH="$site/bin:$PATH"
else
    skip install cpu "no --wheelhouse: using the packages $python has"
fi
step packages "$(fit 60 $((reserve_late + 60)))" required cpu "every package the check needs is installed, versions agreeing (tools/wheelhouse.py)" -- \
    "$python" "$here/wheelhouse.py" verify
step data "$(fit 120 $((reserve_late + 60)))" required cpu "the offline stand-ins in the BSDS300 and CIFAR-10 formats, in $COURSE_DATA_DIR" -- \
    "$python" -c 'from helpers.course.data import prepare_bsds300 as s, prepare_cifar10 as c
for source in (s(progress=False), c(progress=False)): print(source.describe())'
summarise
if grep -q $'^\(install\|packages\|data\)\t\(failed\|timed-out\|not-run\)' "$out/steps.tsv"; then
    say "the packages or the data are not ready: nothing else can run" >&2
    finish
fi

# --- 2. the CUDA tests and the notebooks, each notebook in its own process ------------------------------------------
pytest_step() {  # pytest_step NAME CAP MODE NOTE PYTEST-ARGUMENTS...: its own basetemp (runs side by side)
    local name=$1 cap=$2 mode=$3 note=$4
    shift 4
    step "$name" "$(fit "$cap" "$reserve_late")" "$mode" cuda "$note" -- env COURSE_PROFILE=smoke \
        COURSE_REQUIRE_CUDA="$require_cuda" "$python" -m pytest "$@" -p no:cacheprovider -o addopts="" -rs \
        --basetemp "$work/tmp/$name" --junitxml "$junit/$name.xml"
}
queue() {  # run the command in the background once fewer than $parallel run; at once when parallel is 1
    if ((parallel <= 1 || plan_only)); then
        "$@"
        return
    fi
    while (($(jobs -pr | wc -l) >= parallel)); do wait -n; done
    "$@" &
}
queue pytest_step cuda-tests "$cap_tests" required "the CUDA tests (pytest tests/cuda -m cuda)" tests/cuda -m cuda
for path in "${notebooks[@]}"; do
    name=${path##*/}
    queue pytest_step "nbval-${name:0:2}" "$cap_notebook" required "nbval, smoke profile: $name" "$path" \
        --nbval-lax --nbval-current-env --nbval-cell-timeout=$((cap_notebook - 10))
done
wait
summarise

# --- 3. the benchmarks, alone on the machine --------------------------------------------------------------------
step bench-sr "$(fit "$cap_bench" $((cap_bench + cap_speedups + cap_train + reserve_summary)))" required cuda \
    "python -m helpers.course.bench sr --profile $profile" -- \
    "$python" -m helpers.course.bench sr --profile "$profile" --json "$out/bench-sr.json"
summarise
step bench-cifar "$(fit "$cap_bench" $((cap_speedups + cap_train + reserve_summary)))" required cuda \
    "python -m helpers.course.bench cifar --profile $profile" -- \
    "$python" -m helpers.course.bench cifar --profile "$profile" --json "$out/bench-cifar.json"
summarise

# --- 4. the step-side speed-ups, torch.compile only with a compiler ----------------------------------------------
skip_compile=()
[[ -z $compiler ]] && skip_compile=(--skip-compile "$compiler_reason: Triton needs one")
step speedups "$(fit "$cap_speedups" $((cap_train + reserve_summary)))" optional cuda \
    "python tools/gpu_speedups.py --profile $profile" -- \
    "$python" "$here/gpu_speedups.py" --profile "$profile" --json "$out/speedups.json" "${skip_compile[@]}"
summarise

# --- 5. the CIFAR-10 ResNet18 run, time-boxed -------------------------------------------------------------------
box=$(fit "$cap_train" "$reserve_summary")
step train-cifar "$box" timebox cuda "python -m helpers.course.train cifar --profile $profile, stopped after $box s" -- \
    "$python" -m helpers.course.train cifar --profile "$profile" --checkpoint-dir "$work/runs/cifar"

finish
