#!/usr/bin/env bash
# On the H200 (device tool): a real library's every op module judged by its whole test suite in
# one command, compiled mode (LIB: a checkout with src/liger_kernel/ops and test/transformers).
# Usage: [PATHS="src/liger_kernel/ops/softmax.py ..."] [SHARD=1/8] [EXTRA="--case-time 5"]
#        bash benchmarks/h200_whole_library.sh LIB SECONDS   (PATHS: default every op module)
# Results under $OUT: library.json (the report), library.txt (the console). The cache lives in
# /tmp/wlc on the machine: a second call while it is warm resumes from it.
set -uo pipefail
LIB=${1:-.liger}; LIMIT=${2:-540}
source "$(dirname "$0")/h200_install.sh"
cd "$LIB" && /usr/bin/time -f "library wall %e s" timeout "$LIMIT" python -m mutant_gate.cli run \
  ${PATHS:-src/liger_kernel/ops} --tests test/transformers ${SHARD:+--shard $SHARD} \
  --mode compiled -j 16 --writer none --no-write-tests ${EXTRA:-} \
  --json "$OUT/library.json" --cache-dir /tmp/wlc > "$OUT/library.txt" 2>&1
echo "exit $?"; grep -v "^original\|mutants done" "$OUT/library.txt" | tail -90 | cut -c1-200
