#!/usr/bin/env bash
# On the H200 (device tool): a library run with its modules overlapping on the pool against
# the same run with each module started once the one before has ended (benchmarks/
# library_overlap.py), compiled mode, fresh caches (the tool's and Triton's) for each run.
# Usage: [FIRST=overlapped] bash benchmarks/h200_library_overlap.sh LIB "PATHS" "TESTS" [ROUNDS]
set -uo pipefail
LIB=${1:-.liger}; PATHS=$2; TESTS=$3; ROUNDS=${4:-1}
source "$(dirname "$0")/h200_install.sh"
python benchmarks/library_overlap.py "$LIB" $PATHS --tests $TESTS --rounds "$ROUNDS" ${FIRST:+--overlapped-first} -- \
  --mode compiled -j 16 2>&1 | tee "$OUT/overlap.txt"
