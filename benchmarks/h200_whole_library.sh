#!/usr/bin/env bash
# On the H200 (device tool): a real library's every op module judged by its whole test suite in
# one command, compiled mode (LIB: a checkout with src/liger_kernel/ops and test/transformers).
# Usage: [PATHS="src/liger_kernel/ops/softmax.py ..."] [SHARD=1/8] [EXTRA="--case-time 5"]
#        bash benchmarks/h200_whole_library.sh LIB SECONDS   (PATHS: default every op module)
# Results under $OUT: library.json (the report), library.txt (the console). The cache lives in
# /tmp/wlc on the machine: a second call while it is warm resumes from it. With KEEP_CACHE=1
# the cache also comes back as $OUT/wlc.tgz; put it in .wlc/ (ignored, carried) and a call on a
# fresh machine resumes from it.
set -uo pipefail
LIB=${1:-.liger}; LIMIT=${2:-540}
source "$(dirname "$0")/h200_install.sh"
if [ ! -d /tmp/wlc ] && [ -f .wlc/wlc.tgz ]; then tar xzf .wlc/wlc.tgz -C /tmp && echo "resumed from .wlc/wlc.tgz"; fi
cd "$LIB" && /usr/bin/time -f "library wall %e s" timeout "$LIMIT" python -m mutant_gate.cli run \
  ${PATHS:-src/liger_kernel/ops} --tests test/transformers ${SHARD:+--shard $SHARD} \
  --mode compiled -j 16 --writer none --no-write-tests ${EXTRA:-} \
  --json "$OUT/library.json" --cache-dir /tmp/wlc > "$OUT/library.txt" 2>&1
echo "exit $?"
if [ -n "${KEEP_CACHE:-}" ]; then tar czf "$OUT/wlc.tgz" -C /tmp wlc && ls -la "$OUT/wlc.tgz"; fi
grep "mutants done" "$OUT/library.txt" | tail -2 | cut -c1-300
grep -v "^original\|mutants done" "$OUT/library.txt" | tail -90 | cut -c1-200
