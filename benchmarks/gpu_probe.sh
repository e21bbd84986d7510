#!/usr/bin/env bash
# The probe writer in compiled mode on a CUDA machine (run from the repo root): the
# gpu-marked tests (TESTS=0 leaves them out), then each FILE with --writer probe
# (default: the softmax and layer-norm examples), each capped at CAP seconds (150).
# Usage: [CAP=S] [TESTS=0] benchmarks/gpu_probe.sh OUTDIR [FILE...]
# OUTDIR is packed to OUTDIR.tgz after each step, so what finished survives a cut.
set -u
out=${1:?OUTDIR}
shift
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(examples/softmax.py examples/layer_norm.py)
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
if [ "${TESTS:-1}" != 0 ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_compiled_mode.py > "$out/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$out/gpu_tests.txt"
  pack
fi
for f in "${files[@]}"; do
  name=$(basename "$f" .py)
  start=$(date +%s%N)
  timeout "${CAP:-150}" python3 -m mutant_gate.cli run "$f" --mode compiled --writer probe \
    --no-cache -q --json "$out/$name.probe.json" > "$out/$name.probe.txt" 2>&1
  echo "$name rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/times.txt"
  pack
done
