#!/usr/bin/env bash
# Device probe, 2026-11-27, one H200: the GPT validation steps, three PyTorch training steps
# (data/traces/h200-2026-11-27/train_steps.py), the bf16 GEMM grid and the memory suite, with the
# SM clock sampled every 100 ms throughout. Results go straight to $OUT.
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd); cd "$root"
bin=$root/build/device
log=$OUT/run.log
site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
libs=$(find "$site/nvidia" \( -name 'libcublasLt.so*' -o -name 'libnccl.so*' \) -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$bin/dtsim-calibrate" --help >/dev/null 2>&1 || export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$bin/runtime
phase() { echo "== $(date -u +%FT%T.%3NZ) $*" | tee -a $log; }
phase start commit $(cat $bin/COMMIT) LD_LIBRARY_PATH=$LD_LIBRARY_PATH
nvidia-smi >> $log 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE >> $log 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $OUT/clocks.csv 2>&1 &
smi=$!
timeout 30 "$bin/dtsim-gpu-info" > $OUT/gpu-info.json 2>>$log
phase validate
timeout --signal=INT --kill-after=10 130 "$bin/dtsim-validate" --models gpt-125m,gpt-350m,gpt-760m,gpt-1.3b --batches 1,4,16 --gpus 1 --fresh --out $OUT/validation.jsonl > $OUT/validate.log 2>&1; echo "exit $?" | tee -a $log
phase pytorch
timeout --signal=INT --kill-after=10 140 python3 data/traces/h200-2026-11-27/train_steps.py $OUT/traces > $OUT/pytorch.log 2>&1; echo "exit $?" | tee -a $log
python3 -c 'import torch, transformers, torchvision; print(torch.__version__, transformers.__version__, torchvision.__version__, torch.version.cuda, torch.backends.cudnn.version())' >> $log 2>&1
phase gemm-bf16
timeout --signal=INT --kill-after=10 70 "$bin/dtsim-calibrate" --fresh --out $OUT/calibration-gemm-bf16.jsonl --benchmark_filter='^gemm/bf16/' > $OUT/calibrate-gemm.log 2>&1; echo "exit $?" | tee -a $log
phase memory
timeout --signal=INT --kill-after=10 50 "$bin/dtsim-calibrate" --fresh --out $OUT/calibration-memory.jsonl --benchmark_filter='^memory/' > $OUT/calibrate-memory.log 2>&1; echo "exit $?" | tee -a $log
phase end
kill $smi
ls -la $OUT $OUT/traces >> $log
