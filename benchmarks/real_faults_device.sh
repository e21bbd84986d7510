#!/usr/bin/env bash
# Issue 49, part 2 on a GPU machine: execution coupling for the real bugs whose fix changed
# tests and that cannot run on the CPU (benchmarks/real_faults_execution.py says how).
#
# Two steps:
#   here (with the mirrors):   bash benchmarks/real_faults_device.sh prepare [MIRRORS] [IDS]
#     writes .realfaults/ (ignored: .git/info/exclude): for each bug a repository holding
#     two commits, the parent's tree and the fix's (files the mirror lacks left out; the
#     commits are new, their ids in .realfaults/catalog.json, the upstream ones beside them
#     as upstream_fix_commit / upstream_parent_commit), about 10 MB in all.
#   on the device (carry .realfaults and .whl), one call per bug or two:
#     bash benchmarks/real_faults_device.sh run IDS [SECONDS]   (SECONDS: default 540)
#     CASE_TIME=S (default 5): the per-case limit of every pytest run, the sanity checks too
#     (fla's cases autotune and compile for longer than 5 s on their first run)
#     PYTEST_LIMIT=S (default 240), RUN_LIMIT=S (default 400): each pytest run's limit and
#     the mutant-gate run's (fla's first sanity run on a fresh H100 took over 240 s)
#     results under $OUT/real-faults (summary.json, summary.md, a console per call); scratch
#     trees and the tool's cache in /tmp/rfwork. A-cp-gk-missing-offsets: on a kind with 2+
#     GPUs (its parent's tests skip below 2).
# IDS: comma-separated bug ids (default: the GPU bugs below). The wheels in .whl are what
# benchmarks/h200_install.sh installs beside the machine's torch and Triton; fla needs
# einops (einops-*-py3-none-any.whl), Liger's tests transformers.
set -uo pipefail
GPU_BUGS=L-geglu-bwd-rounding,L-ce-dxy-lowprec-rmw,F-amax-other-intdtype,A-rwkv7-chanmix-mask,A-cp-gk-missing-offsets,A-attn-lse-store-race
STEP=${1:-run}

if [ "$STEP" = prepare ]; then
  MIRRORS=${2:-/work/.mirror}; IDS=${3:-$GPU_BUGS}
  CATALOG=${CATALOG:-/work/shared/realfaults/catalog.json}
  rm -rf .realfaults/mirrors && mkdir -p .realfaults/mirrors
  python - "$CATALOG" "$MIRRORS" "$IDS" <<'EOF'
import json, os, shutil, subprocess, sys, tempfile
catalog, mirrors, ids = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
sys.path.insert(0, "benchmarks")
from real_faults import git_dir
env = dict(os.environ, GIT_AUTHOR_NAME="real-faults", GIT_AUTHOR_EMAIL="rf@example.com",
           GIT_COMMITTER_NAME="real-faults", GIT_COMMITTER_EMAIL="rf@example.com",
           GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
def run(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=check).stdout.strip()
out = []
for bug in json.load(open(catalog)):
    if bug["id"] not in ids:
        continue
    source = git_dir(mirrors, bug["repo"])
    target = os.path.join(".realfaults", "mirrors", bug["repo"].replace("/", "+"), "repo")
    if not os.path.isdir(target):
        run("git", "init", "-q", "--bare", target)
    work = tempfile.mkdtemp()
    run("git", "clone", "-q", "--shared", "--no-checkout", source, work + "/w")
    new = {}
    for key in ("parent_commit", "fix_commit"):
        # a blob the mirror lacks is reported and left out; the rest is checked out
        run("git", "-C", work + "/w", "checkout", "-q", "-f", bug[key], check=False)
        assert run("git", "-C", work + "/w", "rev-parse", "HEAD") == bug[key], bug[key]
        g = ["git", "--git-dir", target, "--work-tree", work + "/w"]
        run(*g, "read-tree", "--empty")
        run(*g, "add", "-A", ".")
        tree = run(*g, "write-tree")
        parents = ["-p", new["parent_commit"]] if key == "fix_commit" else []
        new[key] = run(*g, "commit-tree", tree, *parents, "-m", f"{bug['id']} {key} {bug[key]}")
        run("git", "--git-dir", target, "update-ref", f"refs/heads/{bug['id']}-{key[:3]}", new[key])
    shutil.rmtree(work)
    out.append({**bug, "upstream_fix_commit": bug["fix_commit"],
                "upstream_parent_commit": bug["parent_commit"], **new})
    print(bug["id"], new["parent_commit"][:12], new["fix_commit"][:12])
json.dump(out, open(".realfaults/catalog.json", "w"), indent=1)
EOF
  for g in .realfaults/mirrors/*/repo; do git --git-dir="$g" gc -q --aggressive --prune=now; done
  du -sh .realfaults
  exit 0
fi

# run, on the device: one bug or a few per call (a device command may run 10 minutes); the
# summary lives in /tmp/rf-out while the machine stays warm, so each call adds its bugs' rows
# to the earlier calls' (real_faults.py keeps OUT's earlier execution entries), and is copied
# to $OUT/real-faults at the end of every call
IDS=${2:-$GPU_BUGS}; LIMIT=${3:-540}
OUT=${OUT:-/tmp/out}; RES=/tmp/rf-out; mkdir -p "$OUT/real-faults" "$RES"
source "$(dirname "$0")/h200_install.sh"
python -c "import einops" 2>/dev/null || echo "einops missing: fla cannot import (carry its wheel in .whl)"
nvidia-smi -L
/usr/bin/time -f "real-faults wall %e s" timeout "$LIMIT" python benchmarks/real_faults.py \
  --catalog .realfaults/catalog.json --mirrors .realfaults/mirrors --out "$RES" \
  --execution --bugs "$IDS" --work /tmp/rfwork --mode compiled -j 16 --case-time "${CASE_TIME:-5}" \
  --limit "${PYTEST_LIMIT:-240}" --run-limit "${RUN_LIMIT:-400}" > "$RES/console-$(date +%H%M%S).txt" 2>&1
echo "exit $?"; cp -r "$RES/." "$OUT/real-faults/"
ls -t "$RES"/console-*.txt | head -1 | xargs tail -12 | cut -c1-400
