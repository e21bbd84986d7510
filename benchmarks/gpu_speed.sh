#!/usr/bin/env bash
# Compiled mode's speed and verdicts on a CUDA machine (run from the repo root):
# the gpu-marked tests, benchmarks/compiled.py (warm runner vs fork per job vs the
# interpreter, side by side), every example compiled (verdicts to compare with an
# earlier record), --mode auto on two examples, a GPU original given CPU tensors, and
# given a folder of real kernel files, those files compiled.
# Usage: benchmarks/gpu_speed.sh OUTDIR [KERNEL_FILES_DIR]
# OUTDIR is packed to OUTDIR.tgz after each step, so what finished survives a cut.
set -u
out=${1:?OUTDIR}
files=${2:-}
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
mg() { python3 -m mutant_gate.cli "$@"; }
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count(), 'cores', __import__('os').cpu_count())"
} > "$out/gpu_env.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_compiled_mode.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$out/gpu_tests.txt"
pack
python3 benchmarks/compiled.py -j "$(nproc)" --sample 2 > "$out/compiled_bench.txt" 2>&1
pack
for f in examples/*.py; do
  name=$(basename "$f" .py)
  start=$(date +%s%N)
  mg run "$f" --mode compiled --writer none --no-cache -q --json "$out/$name.compiled.json" > "$out/$name.compiled.txt" 2>&1
  echo "$name compiled rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/gpu_times.txt"
done
pack
for name in vector_add layer_norm; do
  start=$(date +%s%N)
  mg run "examples/$name.py" --writer none --no-cache --json "$out/$name.auto.json" > "$out/$name.auto.txt" 2>&1
  echo "$name auto rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/gpu_times.txt"
done
pack
cpu=$(mktemp -d)/cpu_tensors.py
sed 's/device="cuda"/device="cpu"/; s/DEVICE = .*/DEVICE = "cpu"/' examples/vector_add.py > "$cpu"
mg run "$cpu" --mode compiled --writer none --no-cache > "$out/cpu_tensors.txt" 2>&1
echo "rc=$?" >> "$out/cpu_tensors.txt"
pack
if [ -n "$files" ]; then
  python3 benchmarks/real_files.py "$files" "$out/real" -- --mode compiled --writer none > "$out/real_files.md" 2> "$out/real_files.log"
  rm -rf "$out/real/cache"
  pack
fi
