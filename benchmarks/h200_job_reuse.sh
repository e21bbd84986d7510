#!/usr/bin/env bash
# On the GPU (device tool): benchmarks/job_reuse.py with the code before a change (OLD: a
# `git archive` of it, carried, default .snap) and this tree, side by side on one module of a
# real library (LIB, default .liger). Usage:
#   [OLD=.snap] [ROUNDS=1] bash benchmarks/h200_job_reuse.sh LIB -- <mutant-gate run arguments>
set -uo pipefail
LIB=${1:-.liger}; shift
OLD=${OLD:-.snap}
source "$(dirname "$0")/h200_install.sh"
if [ ! -d /tmp/site-old/mutant_gate ]; then
  cp -r /tmp/site /tmp/site-old && rm -rf /tmp/site-old/mutant_gate /tmp/site-old/mutant_gate-*
  pip install -q --no-deps --no-build-isolation --target /tmp/site-old "$OLD" 2>&1 | tail -2
fi
BENCH=$(pwd)/benchmarks/job_reuse.py
cd "$LIB" && python "$BENCH" --old /tmp/site-old --new /tmp/site --rounds "${ROUNDS:-1}" --out "$OUT" "$@"
