#!/bin/bash
# verdicts before (da04a25) and after (b370c50) issue 45's loop batching, fresh caches each
S=/work/snap45
cd /work/vp
for tag in before after; do
  site=/work/sk/after; [ $tag = after ] && site=/work/sk/after45
  for f in $S/examples/softmax.py $S/examples/layer_norm.py $S/examples/matmul.py $S/examples/vector_add.py $S/tests/data/tutorial_vector_add.py $S/tests/data/tutorial_layer_norm.py $S/tests/data/tutorial_softmax_warmup.py; do
    n=$(basename $f .py)
    PYTHONPATH=$site python -m mutant_gate.cli run $f --writer none --no-write-tests -j 2 -q --json $n.$tag.json --cache-dir cache-$tag > $n.$tag.out 2>&1
  done
  PYTHONPATH=$site python -m mutant_gate.cli run $S/examples/kernel_lib/src/kernel_lib/ops/rms_norm.py --tests $S/examples/kernel_lib/tests --writer none --no-write-tests -j 2 -q --json kl_rms_norm.$tag.json --cache-dir cache-$tag > kl_rms_norm.$tag.out 2>&1
done
echo done > finished
