#!/usr/bin/env bash
# Plan evaluations per second on the 64-GPU scenario: builds Release, runs eval_speed RUNS
# times on each core in turn (one core per run), writes benchmarks/out/eval_speed.csv and
# prints the median. Usage: benchmarks/eval_speed.sh [RUNS_PER_CORE] [EVALUATIONS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
count=${2:-100000}
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
csv="$root/benchmarks/out/eval_speed.csv"
echo "core,scenario,gpus,plans,evaluations,seconds,evaluations_per_second" > "$csv"
for core in $(seq 0 $(($(nproc) - 1))); do
  for _ in $(seq "$runs"); do
    row=$(taskset -c "$core" "$root/build/release/benchmarks/eval_speed" \
          "$root/benchmarks/scenarios/regions2-mixed-64/cluster.json" \
          "$root/benchmarks/scenarios/regions2-mixed-64/workload.json" "$count")
    echo "$core,$row" >> "$csv"
  done
done
tail -n +2 "$csv" | cut -d, -f7 | sort -n | awk '{v[NR]=$1} END {
  m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2;
  printf "evaluations/s over %d runs: median %.0f, min %.0f, max %.0f\n", NR, m, v[1], v[NR]}'
echo "rows: $csv"
