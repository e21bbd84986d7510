#!/usr/bin/env bash
# On the H200 (device tool): what the tolerance hid on a real library's op modules, judged
# by their own test files in one library run, compiled mode (LIB: a checkout with
# src/liger_kernel/ops and test/transformers).
# Usage: [MODULES="softmax kl_div ..."] [EXTRA="--case-time 5"] bash benchmarks/h200_tolerance.sh LIB SECONDS
# Results under $OUT: tolerance.json (the report), tolerance.txt (the console), summary.md
# (benchmarks/tolerance_summary.py). The cache lives in /tmp/tol on the machine: a second
# call while it is warm resumes from it.
set -uo pipefail
LIB=${1:-.liger}; LIMIT=${2:-540}
source "$(dirname "$0")/h200_install.sh"
HERE=$(pwd)
PATHS=(); TESTS=()
for m in ${MODULES:-softmax relu_squared sparsemax kl_div tvd geglu swiglu}; do
  PATHS+=("src/liger_kernel/ops/$m.py"); TESTS+=(--tests "test/transformers/test_$m.py")
done
cd "$LIB" && /usr/bin/time -f "wall %e s" timeout "$LIMIT" python -m mutant_gate.cli run \
  "${PATHS[@]}" "${TESTS[@]}" --mode compiled -j 16 --writer none --no-write-tests ${EXTRA:-} \
  --json "$OUT/tolerance.json" --cache-dir /tmp/tol > "$OUT/tolerance.txt" 2>&1
echo "exit $?"
python "$HERE/benchmarks/tolerance_summary.py" "$OUT/tolerance.json" | tee "$OUT/summary.md"
grep -v "^original\|mutants done" "$OUT/tolerance.txt" | tail -40 | cut -c1-220
