#!/usr/bin/env bash
# Kernel-thread speed-up of the shared models: `run MODEL --threads T --repeat N` with T = 1 and
# T = THREADS alternated ROUNDS times per model, median invoke of each run, the median of those
# per T, and their ratio. Also prints, per run, how many CPUs *other* processes kept busy
# meanwhile (the machine's busy time from /proc/stat minus the run's own CPU time): a
# multi-thread figure means something only when that is near 0.
#
# Usage: tools/threads_speedup.sh [ROUNDS] [THREADS] [MODEL.tflite ...]
#   (defaults: 3 rounds, 2 threads, the models of issue 15 under ../shared/models)
# Build first: cargo build --release
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/tensor-alloc
ROUNDS=${1:-3}
THREADS=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
if [ $# -eq 0 ]; then
  set -- ../shared/models/keras/mobilenet_v2_f32.tflite ../shared/models/keras/unet_prelu_f32.tflite \
    ../shared/models/keras/mobilenet_v3_small_f16w.tflite ../shared/models/keras/tiny_transformer_f32.tflite \
    ../shared/models/keras/pruned_cnn_sparse.tflite ../shared/models/tflm/it_seanet_conv10.tflite
fi
REPEAT=${REPEAT:-30}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
ticks=$(getconf CLK_TCK)
for model in "$@"; do
  [ -f "$model" ] || { echo "skip $model (absent)"; continue; }
  declare -a m1=() mt=()
  for _ in $(seq "$ROUNDS"); do
    for t in 1 "$THREADS"; do
      b0=$(busy); s0=$(date +%s.%N)
      out=$( { /usr/bin/time -f "CPUTIME %U %S" "$BIN" run "$model" --threads "$t" --repeat "$REPEAT"; } 2>&1 )
      b1=$(busy); s1=$(date +%s.%N)
      med=$(echo "$out" | sed -n 's/.*median \([0-9.]*\) µs.*/\1/p')
      own=$(echo "$out" | awk '/^CPUTIME/{print $2 + $3}')
      others=$(awk -v b="$((b1 - b0))" -v tk="$ticks" -v own="$own" -v w="$(echo "$s1 - $s0" | bc)" \
        'BEGIN { o = b / tk - own; if (o < 0) o = 0; printf "%.2f", o / w }')
      echo "$(basename "$model") threads $t: median $med µs (other processes: $others CPUs)"
      if [ "$t" = 1 ]; then m1+=("$med"); else mt+=("$med"); fi
    done
  done
  med_of() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
  a=$(med_of "${m1[@]}"); b=$(med_of "${mt[@]}")
  awk -v a="$a" -v b="$b" -v m="$(basename "$model")" -v t="$THREADS" \
    'BEGIN { printf "== %s: 1 thread %.0f µs, %d threads %.0f µs, speed-up %.2fx\n", m, a, t, b, a / b }'
done
