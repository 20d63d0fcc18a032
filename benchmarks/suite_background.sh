#!/usr/bin/env bash
# Run (or resume) a benchmark suite in the background, from its own worktree and venv at a fixed
# commit, so that edits to the checkout do not change runs mid-suite; save its finished runs into
# benchmarks/results/<suite>/ (small text files, committed) after every run that finishes.
#
#   benchmarks/suite_background.sh mpe [COMMIT]     # start, or resume from the committed results
#   benchmarks/suite_background.sh mpe --save       # save what has finished now (no run)
#   benchmarks/suite_background.sh mpe --revise [COMMIT]   # move a stopped suite to COMMIT's suite file
#
# The commit: the one benchmarks/results/<suite>/provenance.json names when the suite has begun
# (a resume keeps it), else COMMIT (default HEAD). Stop it with kill -TERM of its `harl suite`
# process (a background job ignores SIGINT, so kill -INT does nothing): its runs checkpoint; a later
# call resumes. Do not edit this script while a suite runs: bash reads it as it goes. On a fresh machine the
# worktree, its venv and the suite directory are made from the committed results alone
# (unfinished runs start again). --revise moves a stopped suite to the suite file of a later commit
# (default HEAD): unchanged entries keep their runs, changed ones start anew, the provenance records
# both commits (benchmarks/suite_results.py revise); run the script again to resume it.
set -euo pipefail
SUITE="${1:?suite name, e.g. mpe}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${HARL_SUITE_BASE:-$ROOT/../harl-suites}"
RESULTS="$ROOT/benchmarks/results/$SUITE"
SUITE_DIR="$BASE/runs/$SUITE"
JOBS="${HARL_SUITE_JOBS:-1}"
EXTRAS="${HARL_SUITE_EXTRAS:-mpe}"

save() {
    if [ -f "$SUITE_DIR/suite.json" ]; then
        python3 "$ROOT/benchmarks/suite_results.py" save "$SUITE_DIR" "$RESULTS"
    fi
}
if [ "${2:-}" = "--save" ]; then save; exit 0; fi

checkout() {  # the worktree and venv of commit $1: WT and VENV (a venv per set of extras)
    WT="$BASE/worktree-${1:0:10}"
    VENV="$BASE/venv-${1:0:10}-${EXTRAS//,/-}"
    mkdir -p "$BASE/runs"
    if [ ! -d "$WT" ]; then
        git -C "$ROOT" worktree add --detach "$WT" "$1"
    fi
    if [ ! -x "$VENV/bin/harl" ]; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet --upgrade pip
        "$VENV/bin/pip" install --quiet "torch==2.13.0"
        "$VENV/bin/pip" install --quiet "$WT[$EXTRAS]"   # not editable: the installed copy is the commit's
        if [[ "$EXTRAS" == *smax* ]]; then "$VENV/bin/pip" install --quiet --no-deps "jaxmarl==0.2.0"; fi
    fi
}

if [ "${2:-}" = "--revise" ]; then
    if pgrep -f "harl suite .*$SUITE_DIR" > /dev/null; then
        echo "suite $SUITE is running: stop it first (kill -INT of its harl suite process)" >&2; exit 2
    fi
    NEW="$(git -C "$ROOT" rev-parse "${3:-HEAD}")"
    checkout "$NEW"
    if [ ! -f "$SUITE_DIR/suite.json" ]; then
        python3 "$ROOT/benchmarks/suite_results.py" restore "$RESULTS" "$SUITE_DIR"
    fi
    "$VENV/bin/python" "$ROOT/benchmarks/suite_results.py" revise "$SUITE_DIR" "$WT/benchmarks/suites/$SUITE.toml" "$RESULTS" "$NEW"
    exit 0
fi

if [ -f "$RESULTS/provenance.json" ]; then
    COMMIT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["commit"])' "$RESULTS/provenance.json")"
else
    COMMIT="$(git -C "$ROOT" rev-parse "${2:-HEAD}")"
fi
checkout "$COMMIT"
if [ ! -f "$SUITE_DIR/suite.json" ] && [ -f "$RESULTS/suite.json" ]; then
    python3 "$ROOT/benchmarks/suite_results.py" restore "$RESULTS" "$SUITE_DIR"
fi
if [ ! -f "$RESULTS/provenance.json" ]; then
    mkdir -p "$RESULTS"
    python3 - "$RESULTS/provenance.json" "$COMMIT" "$SUITE" <<'PY'
import json, os, platform, sys
out, commit, suite = sys.argv[1:]
json.dump({"suite": suite, "commit": commit, "machine": f"{os.cpu_count()} cores, {platform.machine()}",
           "python": platform.python_version(), "torch": "2.13.0 (CPU build)",
           "command": f"benchmarks/suite_background.sh {suite}"}, open(out, "w"), indent=1)
PY
fi

export OMP_NUM_THREADS=1
cd "$WT"
if [ -f "$SUITE_DIR/suite.json" ]; then
    ARGS=(--resume "$SUITE_DIR")
else
    ARGS=("benchmarks/suites/$SUITE.toml" --out "$SUITE_DIR" --jobs "$JOBS")
fi
# A saver beside the suite: every 5 minutes the finished runs go into benchmarks/results.
( while sleep 300; do save > /dev/null 2>&1 || true; done ) &
SAVER=$!
trap 'kill $SAVER 2>/dev/null || true' EXIT
status=0
# nice alone is not enough where the kernel groups processes by session (autogroup, Linux's default):
# a suite started with setsid is a group of its own and gets a fair share against the whole of the
# interactive session, whatever its nice; the group's own nice makes it yield to other work.
if [ -w /proc/self/autogroup ]; then echo 19 > /proc/self/autogroup 2>/dev/null || true; fi
nice -n 19 "$VENV/bin/harl" suite "${ARGS[@]}" --quiet || status=$?
save
exit "$status"
