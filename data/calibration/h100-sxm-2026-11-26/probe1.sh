#!/usr/bin/env bash
# Device probe, 2026-11-26: memory suite (layout, cross-entropy), bf16 GEMMs, 4 validation points,
# with the SM clock sampled every 100 ms throughout.
set -u
root=$(cd "$(dirname "$0")/.." && pwd); cd "$root"
bin=$root/build/device
w=/tmp/probe; rm -rf $w; mkdir -p $w
log=$OUT/run.log
site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
libs=$(find "$site/nvidia" \( -name 'libcublasLt.so*' -o -name 'libnccl.so*' \) -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$bin/dtsim-calibrate" --help >/dev/null 2>&1 || export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$bin/runtime
phase() { echo "== $(date -u +%FT%T.%3NZ) $*" | tee -a $log; }
phase start commit $(cat $bin/COMMIT) LD_LIBRARY_PATH=$LD_LIBRARY_PATH
nvidia-smi >> $log 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE >> $log 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $w/clocks.csv 2>&1 &
smi=$!
"$bin/dtsim-gpu-info" > $w/gpu-info.json 2>>$log
phase memory
timeout --signal=INT --kill-after=10 150 "$bin/dtsim-calibrate" --fresh --out $w/calibration-memory.jsonl --benchmark_filter='^memory/' > $w/calibrate-memory.log 2>&1; echo "exit $?" | tee -a $log
phase gemm-bf16
timeout --signal=INT --kill-after=10 100 "$bin/dtsim-calibrate" --fresh --out $w/calibration-gemm-bf16.jsonl --benchmark_filter='^gemm/bf16/' > $w/calibrate-gemm.log 2>&1; echo "exit $?" | tee -a $log
phase validate
timeout --signal=INT --kill-after=10 150 "$bin/dtsim-validate" --models gpt-125m,gpt-1.3b --batches 4,8 --gpus 1 --fresh --out $w/validation.jsonl > $w/validate.log 2>&1; echo "exit $?" | tee -a $log
cat $w/validate.log >> $log
phase end
kill $smi
tail -3 $w/calibrate-memory.log $w/calibrate-gemm.log >> $log
cp $w/calibration-memory.jsonl $w/calibration-gemm-bf16.jsonl $w/validation.jsonl $w/clocks.csv $w/gpu-info.json $OUT/ 2>>$log
tar czf $OUT/logs.tgz -C $w calibrate-memory.log calibrate-gemm.log validate.log
ls -la $OUT
