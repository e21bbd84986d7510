#!/bin/bash
# verdicts before (be3314c, this session's start) and after (144b382), fresh caches each
S=/tmp/snapC/src
cd /tmp/vp
for tag in before after; do
  site=/tmp/snapA/site; [ $tag = after ] && site=/tmp/snapC/site
  for f in $S/examples/softmax.py $S/examples/layer_norm.py $S/examples/matmul.py $S/examples/vector_add.py $S/tests/data/tutorial_vector_add.py $S/tests/data/tutorial_layer_norm.py $S/tests/data/tutorial_softmax_warmup.py; do
    n=$(basename $f .py)
    PYTHONPATH=$site python -m mutant_gate.cli run $f --writer none --no-write-tests -j 2 -q --json $n.$tag.json --cache-dir cache-$tag > $n.$tag.out 2>&1
  done
  PYTHONPATH=$site python -m mutant_gate.cli run $S/examples/kernel_lib/src/kernel_lib/ops/rms_norm.py --tests $S/examples/kernel_lib/tests --writer none --no-write-tests -j 2 -q --json kl_rms_norm.$tag.json --cache-dir cache-$tag > kl_rms_norm.$tag.out 2>&1
done
echo done > finished
