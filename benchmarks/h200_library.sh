#!/usr/bin/env bash
# On the H200 (device tool): the project installed beside the machine's torch and Triton,
# then a library run of examples/kernel_lib and of a real library's op modules
# (LIB: a checkout with src/ and test/transformers/) in compiled mode.
# Usage: [OPS="softmax kl_div"] bash benchmarks/h200_library.sh LIB SECONDS   (results
# under $OUT); the op modules and their test files, test/transformers/test_OP.py
set -uo pipefail
LIB=${1:-.liger}; LIMIT=${2:-480}
source "$(dirname "$0")/h200_install.sh"
MG="python -m mutant_gate.cli"
if [ -z "${SKIP_KL:-}" ] && [ ! -f /tmp/kernel_lib.done ]; then
  (cd examples/kernel_lib && /usr/bin/time -f "kernel_lib wall %e s" $MG run src/kernel_lib --tests tests \
     --mode compiled -j 8 --no-write-tests --json "$OUT/kernel_lib.json" --cache-dir /tmp/klc \
     > "$OUT/kernel_lib.txt" 2>&1; tail -25 "$OUT/kernel_lib.txt"; touch /tmp/kernel_lib.done)
fi
OPS=${OPS:-softmax relu_squared kl_div sparsemax}
cd "$LIB" && /usr/bin/time -f "library wall %e s" timeout "$LIMIT" $MG run \
  $(for o in $OPS; do echo src/liger_kernel/ops/$o.py; done) \
  $(for o in $OPS; do echo --tests test/transformers/test_$o.py; done) \
  --mode compiled -j 16 --writer none --no-write-tests ${EXTRA:-} \
  --json "$OUT/library.json" --cache-dir /tmp/libc > "$OUT/library.txt" 2>&1
echo "exit $?"; tail -60 "$OUT/library.txt" | cut -c1-220
