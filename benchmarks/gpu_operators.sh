#!/usr/bin/env bash
# The operators from real bugs, before and after, compiled on a CUDA machine (run from
# the repo root): every example and every file of KERNEL_FILES_DIR run with the version
# before the new operators (OLD_SITE on PYTHONPATH) and with this one (NEW_SITE), both
# --writer none (WRITER=probe for the new side adds the probe: its kills by trigger
# kind, at several times the run time); then the compile-valid share of this version's
# mutants of the same files for sm_75.
# Usage: benchmarks/gpu_operators.sh OUTDIR KERNEL_FILES_DIR OLD_SITE NEW_SITE
# OUTDIR is packed to OUTDIR.tgz after each file, so what finished survives a cut.
# EXAMPLES= (empty) leaves the examples out.
set -u
out=${1:?OUTDIR}
files=${2:?KERNEL_FILES_DIR}
old=${3:?OLD_SITE}
new=${4:?NEW_SITE}
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
for f in "$files"/*.py ${EXAMPLES-examples/*.py}; do
  name=$(basename "$f" .py)
  for side in old new; do
    site=$old writer=none
    [ "$side" = new ] && site=$new writer=${WRITER:-none}
    start=$(date +%s%N)
    PYTHONPATH=$site timeout 170 python3 -m mutant_gate.cli run "$f" --mode compiled \
      --writer "$writer" --no-cache -q --json "$out/$name.$side.json" > "$out/$name.$side.txt" 2>&1
    echo "$name $side rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/times.txt"
  done
  pack
done
PYTHONPATH=$new python3 benchmarks/operators.py -j "$(nproc)" "$files"/*.py \
  > "$out/operators_files.txt" 2>&1
pack
PYTHONPATH=$new python3 benchmarks/operators.py -j "$(nproc)" examples/*.py \
  > "$out/operators_examples.txt" 2>&1
pack
