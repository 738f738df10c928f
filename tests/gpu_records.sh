#!/usr/bin/env bash
# Runs a GPU test command, then checks that it wrote what it measured: an exit of 0 with no
# record matching PATTERN in FILE fails (a benchmark filter that matched nothing, a harness that
# silently wrote nothing). Exit 77 (no GPU) passes through, so CTest reports a skip.
# Usage: gpu_records.sh FILE PATTERN COMMAND...
set -u
file=$1
pattern=$2
shift 2
rm -f "$file"
"$@"
rc=$?
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
n=$(grep -c -F -- "$pattern" "$file" 2>/dev/null)
if [ "${n:-0}" -lt 1 ]; then
  echo "error: '$*' exited 0 but wrote no record matching '$pattern' to $file" >&2
  exit 1
fi
echo "$n records matching '$pattern' in $file"
