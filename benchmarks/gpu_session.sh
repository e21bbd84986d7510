#!/usr/bin/env bash
# One device session's worth of GPU evidence (run from the repo root on a CUDA machine):
# the gpu-marked tests, compiled vs interpreted verdicts on the examples
# (gpu_modes.sh), and, given a folder of real kernel files, those files compiled.
# Usage: benchmarks/gpu_session.sh OUTDIR [KERNEL_FILES_DIR]
# Every step appends to OUTDIR; OUTDIR is packed to OUTDIR.tgz after each step, so
# what finished survives a run cut short.
set -u
out=${1:?OUTDIR}
files=${2:-}
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_compiled_mode.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$out/gpu_tests.txt"
pack
bash benchmarks/gpu_modes.sh "$out"
pack
if [ -n "$files" ]; then
  python3 benchmarks/real_files.py "$files" "$out/real" -- --mode compiled --writer none > "$out/real_files.md" 2> "$out/real_files.log"
  rm -rf "$out/real/cache"
  pack
fi
