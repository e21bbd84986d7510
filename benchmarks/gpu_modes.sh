#!/usr/bin/env bash
# Compiled vs interpreted verdicts and throughput on a CUDA machine (run from the repo root).
# Usage: benchmarks/gpu_modes.sh OUTDIR   (needs mutant_gate importable: pip install -e . or PYTHONPATH)
set -u
out=${1:-benchmarks/results}
mkdir -p "$out"
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())"
} > "$out/gpu_env.txt"
for f in examples/*.py; do
  name=$(basename "$f" .py)
  for mode in interpret compiled; do
    start=$(date +%s%N)
    python3 -m mutant_gate.cli run "$f" --mode $mode --writer none --no-cache -q --json "$out/$name.$mode.json" > "$out/$name.$mode.txt" 2>&1
    rc=$?
    echo "$name $mode rc=$rc wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/gpu_times.txt"
  done
done
python3 benchmarks/mode_table.py "$out" > "$out/gpu_modes.md"
# Under compute-sanitizer memcheck the GPU catches what the interpreter's bounds check does.
python3 -m mutant_gate.cli run examples/vector_add.py --mode compiled --sanitize --writer none --no-cache -q \
  --json "$out/vector_add.sanitize.json" > "$out/vector_add.sanitize.txt" 2>&1
