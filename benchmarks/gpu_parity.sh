#!/usr/bin/env bash
# Interpreter parity on a CUDA machine (run from the repo root): libdevice compiled
# against the interpreter's implementations (libdevice_parity.py), torch's CUDA
# group_norm backward against float64 (is the CPU reference the imprecise one?), and
# every example's compiled verdicts, to compare with the same files' interpreted
# verdicts from a CPU (benchmarks/mode_table.py). --writer none, no cache.
# Usage: benchmarks/gpu_parity.sh OUTDIR [EXAMPLE...]; OUTDIR is packed to OUTDIR.tgz.
set -u
out=${1:?OUTDIR}
shift
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
python3 benchmarks/libdevice_parity.py "$out/libdevice_gpu.md" > "$out/libdevice.log" 2>&1
tail -3 "$out/libdevice_gpu.md"
python3 - > "$out/group_norm_precision.txt" 2>&1 <<'PY'
import torch
torch.manual_seed(0)
for device in ("cuda", "cpu"):
    b, c, g, h = 16, 48, 12, 8192
    x = torch.randn(b, c, h)
    dy = torch.randn(b, c, h)
    ref = torch.nn.GroupNorm(g, c, eps=1e-6).double()
    xr = x.double().requires_grad_()
    ref(xr).backward(dy.double())
    mod = torch.nn.GroupNorm(g, c, eps=1e-6).to(device)
    xd = x.to(device).requires_grad_()
    mod(xd).backward(dy.to(device))
    for name, got, want in (("x", xd.grad, xr.grad), ("weight", mod.weight.grad, ref.weight.grad),
                            ("bias", mod.bias.grad, ref.bias.grad)):
        print(device, name, "max |float32 - float64| =", (got.double().cpu() - want).abs().max().item())
PY
cat "$out/group_norm_precision.txt"
pack
for f in "${@:-examples/rms_norm_libdevice.py}"; do
  name=$(basename "$f" .py)
  start=$(date +%s)
  timeout 170 python3 -m mutant_gate.cli run "$f" --mode compiled --writer none --no-cache -q \
    --json "$out/$name.compiled.json" > "$out/$name.compiled.txt" 2>&1
  echo "$name rc=$? wall_s=$(( $(date +%s) - start ))" | tee -a "$out/times.txt"
  pack
done
