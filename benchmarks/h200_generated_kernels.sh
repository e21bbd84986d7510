#!/usr/bin/env bash
# On the H200 (device tool): a real operator library whose conftest writes a results file into
# the project and whose pointwise kernels are generated at run time (LIB: a checkout with
# src/flag_gems/ops and tests/), its unary pointwise op modules judged in one library run by
# the library's own test file, after the same cases under plain pytest.
# Usage: [OPS="gelu relu silu"] [K="gelu or relu or silu"] bash benchmarks/h200_generated_kernels.sh LIB SECONDS
set -uo pipefail
LIB=${1:-.gems}; LIMIT=${2:-480}
OPS=${OPS:-gelu relu silu abs exp}; K=${K:-gelu or relu or silu or abs or exp}
source "$(dirname "$0")/h200_install.sh"
cd "$LIB"
echo "== plain pytest"
/usr/bin/time -f "pytest wall %e s" timeout 240 python -m pytest tests/test_unary_pointwise_ops.py \
  -k "$K" -q -p no:cacheprovider 2>&1 | tail -4
git status --short 2>/dev/null | head -3; ls result.json 2>/dev/null && rm -f result.json
echo "== mutant-gate"
/usr/bin/time -f "library wall %e s" timeout "$LIMIT" python -m mutant_gate.cli run \
  $(for o in $OPS; do echo src/flag_gems/ops/$o.py; done) --tests tests/test_unary_pointwise_ops.py \
  -k "$K" --mode compiled -j 16 --writer none --no-write-tests ${EXTRA:-} \
  --json "$OUT/gems.json" --cache-dir /tmp/gemsc > "$OUT/gems.txt" 2>&1
echo "exit $?"; ls result.json 2>/dev/null && echo "result.json reached the project"
grep -v "^original\|mutants done" "$OUT/gems.txt" | tail -60 | cut -c1-220
