#!/usr/bin/env bash
# Second call on the same warm machine, 2026-11-27: the first call's validation and PyTorch files
# did not come back (the device tool returns at most 8 files), so the same two phases run again,
# with more micro-batches, the clock sampled, everything packed into one archive.
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd); cd "$root"
bin=$root/build/device
w=/tmp/probe2; rm -rf $w; mkdir -p $w
log=$w/run2.log
site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
libs=$(find "$site/nvidia" \( -name 'libcublasLt.so*' -o -name 'libnccl.so*' \) -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$bin/dtsim-calibrate" --help >/dev/null 2>&1 || export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$bin/runtime
phase() { echo "== $(date -u +%FT%T.%3NZ) $*" | tee -a $log; }
phase start commit $(cat $bin/COMMIT)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $w/clocks2.csv 2>&1 &
smi=$!
phase validate
timeout --signal=INT --kill-after=10 150 "$bin/dtsim-validate" --models gpt-125m,gpt-350m,gpt-760m,gpt-1.3b --batches 1,2,4,8,16 --gpus 1 --fresh --out $w/validation.jsonl > $w/validate.log 2>&1; echo "exit $?" | tee -a $log
phase pytorch
timeout --signal=INT --kill-after=10 140 python3 data/traces/h200-2026-11-27/train_steps.py $w/traces > $w/pytorch2.log 2>&1; echo "exit $?" | tee -a $log
phase end
kill $smi
tar czf $OUT/probe2.tgz -C $w .
ls -la $w $w/traces | tee -a $log
