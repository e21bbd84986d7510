#!/usr/bin/env bash
# The same files' compiled verdicts from two versions of the tool, ROUNDS times each,
# alternating (run from the repo root on a CUDA machine): a mutant whose verdict moves
# between two runs of one version (a read past an allocation's end: on a GPU it sees
# whatever memory holds) is told apart from one that moves between versions. --writer
# none, every run from an empty cache.
# Usage: [ROUNDS=2] [SIDES="old new"] benchmarks/gpu_verdicts.sh OUTDIR OLD_SITE NEW_SITE FILE...
# OUTDIR is packed to OUTDIR.tgz after each run, so what finished survives a cut.
set -u
out=${1:?OUTDIR}
old=${2:?OLD_SITE}
new=${3:?NEW_SITE}
shift 3
mkdir -p "$out"
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
for f in "$@"; do
  name=$(basename "$f" .py)
  for round in $(seq "${ROUNDS:-2}"); do
    for side in ${SIDES:-old new}; do
      site=$old
      [ "$side" = new ] && site=$new
      start=$(date +%s%N)
      PYTHONPATH=$site timeout 170 python3 -m mutant_gate.cli run "$f" --mode compiled \
        --writer none --no-cache -q --json "$out/$name.$side.$round.json" \
        > "$out/$name.$side.$round.txt" 2>&1
      echo "$name $side $round rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" \
        >> "$out/times.txt"
      pack
    done
  done
done
