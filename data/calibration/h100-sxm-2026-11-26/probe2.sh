#!/usr/bin/env bash
set -u
root=$(cd "$(dirname "$0")/.." && pwd); cd "$root"
bin=$root/build/device; w=/tmp/probe2; rm -rf $w; mkdir -p $w; log=$OUT/run.log
site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
export LD_LIBRARY_PATH=$(find "$site/nvidia" \( -name 'libcublasLt.so*' -o -name 'libnccl.so*' \) -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
echo "== $(date -u +%FT%T.%3NZ) commit $(cat $bin/COMMIT)" | tee -a $log
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.max.sm,power.limit --format=csv >> $log 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $OUT/clocks.csv 2>&1 &
smi=$!
timeout --signal=INT --kill-after=10 120 "$bin/dtsim-calibrate" --fresh --out $OUT/calibration-ce.jsonl --benchmark_filter='^memory/cross_entropy' > $w/calibrate-ce.log 2>&1; echo "exit $?" | tee -a $log
kill $smi
cat $w/calibrate-ce.log >> $log
grep cross_entropy $w/calibrate-ce.log
