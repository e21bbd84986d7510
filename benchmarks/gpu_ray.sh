#!/usr/bin/env bash
# --backend ray in compiled mode on a CUDA machine, beside the local pool (run from the
# repo root of a tree whose package is importable): Ray's per-job overhead on the GPU
# (benchmarks/ray_overhead.py --mode compiled, an actor per GPU against as many local
# workers), then each FILE run with --mode compiled on both backends, verdicts compared.
# RAYDIR: ray-pruned.tgz (Ray's wheel unpacked, without its Java jars, dashboard build
# and ML libraries, none of which a run imports) and deps/*.whl (Ray's requirements);
# what the machine lacks of them is appended to its sys.path (a .pth file), so nothing
# it has is shadowed.
# Usage: [OVERHEAD=0] benchmarks/gpu_ray.sh OUTDIR RAYDIR [FILE...]
set -u
out=${1:?OUTDIR}
raydir=${2:?RAYDIR}
shift 2
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(examples/softmax.py examples/layer_norm.py)
mkdir -p "$out" /tmp/rayenv /tmp/raydeps
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
{
  echo "uid=$(id -u) gpus=$(nvidia-smi -L | wc -l)"
  tar xzf "$raydir/ray-pruned.tgz" -C /tmp/rayenv
  pip install -q --no-deps --no-index --target /tmp/raydeps "$raydir"/deps/*.whl 2>&1 | tail -2
  site=$(python3 -c "import site; print(site.getsitepackages()[0])")
  printf '/tmp/rayenv\n/tmp/raydeps\n' > "$site/zz-mutant-gate-ray.pth"
  python3 -c "import ray, msgpack, google.protobuf, jsonschema; print('ray', ray.__version__)"
} > "$out/setup.txt" 2>&1
pack
if [ "${OVERHEAD:-1}" != 0 ]; then
  timeout 200 python3 benchmarks/ray_overhead.py --mode compiled -j 1 --rounds 3 \
    > "$out/overhead.txt" 2>&1
  echo "rc=$?" >> "$out/overhead.txt"
  pack
fi
for f in "${files[@]}"; do
  name=$(basename "$f" .py)
  for backend in local ray; do
    start=$(date +%s%N)
    timeout 150 python3 -m mutant_gate.cli run "$f" --mode compiled --writer none --no-cache \
      -j 1 --backend "$backend" --json "$out/$name.$backend.json" > "$out/$name.$backend.txt" 2>&1
    echo "$name $backend rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$out/times.txt"
    pack
  done
done
