#!/usr/bin/env bash
# Hybrid's planning time as the cluster grows: clusters of 64 to 4,096 GPUs, a quarter each of
# H100 (p5), A100-80G (p4de), L40S (g6e) and L4 (g6) nodes in two zones of us-east-1, us-west-2
# and eu-west-1 (regions3-mixed-512 scaled), each planned with the workloads of three benchmark
# scenarios (PPO 7B, PPO 14B with a reward model, GRPO 70B). Wall seconds as hetrl-plan
# reports them, the median of RUNS runs; writes benchmarks/out/scale.csv.
# Usage: benchmarks/scale.sh [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
"$root/scripts/build" Release >/dev/null
out="$root/benchmarks/out/scale"
mkdir -p "$out"
csv="$root/benchmarks/out/scale.csv"
echo "gpus,workload,runs,median_seconds,min_seconds,max_seconds,evaluations,samples_per_second" > "$csv"
for gpus in 64 256 1024 4096; do
  n=$((gpus / 32))
  "$root/build/release/apps/hetrl-cluster" --name "scale-$gpus" --preset-node "us-east-1a:${n}xp5.48xlarge" \
    --preset-node "us-east-1b:${n}xp4de.24xlarge" --preset-node "us-west-2a:${n}xg6e.48xlarge" \
    --preset-node "eu-west-1a:${n}xg6.48xlarge" -o "$out/cluster-$gpus.json" >/dev/null
  for scenario in regions2-mixed-64 zones2-mixed-128 regions3-mixed-512; do
    workload="$root/benchmarks/scenarios/$scenario/workload.json"
    times=() evaluations="" sps=""
    for _ in $(seq "$runs"); do
      log=$("$root/build/release/apps/hetrl-plan" --cluster "$out/cluster-$gpus.json" --workload "$workload" 2>&1)
      times+=("$(sed -n 's/^planned in \([0-9.]*\) s.*/\1/p' <<< "$log")")
      evaluations=$(sed -n 's/^planned in .* (\([0-9]*\) evaluations).*/\1/p' <<< "$log")
      sps=$(sed -n 's/.*| \([0-9.]*\) samples\/s |.*/\1/p' <<< "$log" | head -1)
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    median=$(awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}' <<< "$sorted")
    echo "$gpus,$scenario,$runs,$median,$(head -1 <<< "$sorted"),$(tail -1 <<< "$sorted"),$evaluations,$sps" >> "$csv"
    tail -1 "$csv"
  done
done
echo "rows: $csv"
