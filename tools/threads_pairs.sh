#!/usr/bin/env bash
# Two-thread speed-up as back-to-back pairs: per round and binary, `run MODEL --threads 1` then
# `--threads 2` (REPEAT invokes each) and the ratio of their medians; at the end the median and
# range of each binary's ratios. On a shared host (a VM whose vCPUs other guests use too) a pair
# taken within a second is the comparable unit: the host's speed moves between minutes. Stop
# other processes in the machine first; print nothing when a binary fails.
#
# Usage: tools/threads_pairs.sh MODEL ROUNDS BIN [BIN ...]
set -euo pipefail
model=$1 rounds=$2
shift 2
REPEAT=${REPEAT:-40}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
median_of() { sed -n 's/.*median \([0-9.]*\) µs.*/\1/p'; }
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    t1=$("$bin" run "$model" --threads 1 --repeat "$REPEAT" 2>&1 | median_of)
    t2=$("$bin" run "$model" --threads 2 --repeat "$REPEAT" 2>&1 | median_of)
    echo "$bin $t1 $t2" | tee -a "$out"
  done
done
for bin in "$@"; do
  awk -v b="$bin" '$1 == b { print $2 / $3 }' "$out" | sort -g |
    awk -v b="$bin" '{ a[NR] = $1 } END {
      m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf "%s: speed-up median %.2f (%.2f .. %.2f over %d pairs)\n", b, m, a[1], a[NR], NR }'
done
