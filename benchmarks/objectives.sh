#!/usr/bin/env bash
# Hybrid against the ILP under each goal (throughput; dollars per sample; throughput within a
# budget of half the cluster's price an hour) on every benchmark scenario and, with --paper,
# on the paper's scenarios too (benchmarks/paper: 4 networks x 12 workloads). Release build.
# Writes benchmarks/out/objectives.csv and prints a Markdown table: the ILP's status and value,
# hybrid's value, and how far hybrid is behind where the ILP proved its optimum.
# Usage: benchmarks/objectives.sh [--paper] [--goals throughput,cost,budget]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
paper=0
goals=throughput,cost,budget
while [[ $# -gt 0 ]]; do
  case $1 in
    --paper) paper=1; shift ;;
    --goals) goals=$2; shift 2 ;;
    *) echo "usage: benchmarks/objectives.sh [--paper] [--goals throughput,cost,budget]" >&2; exit 2 ;;
  esac
done
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
args=()
for d in "$root"/benchmarks/scenarios/*/; do args+=("$d/cluster.json" "$d/workload.json"); done
if [[ $paper == 1 ]]; then
  for c in "$root"/benchmarks/paper/clusters/*.json; do
    for w in "$root"/benchmarks/paper/workloads/*.json; do args+=("$c" "$w"); done
  done
fi
csv="$root/benchmarks/out/objectives.csv"
"$root/build/release/benchmarks/objectives" --goals "$goals" "${args[@]}" > "$csv"
awk -F, 'NR > 1 {
  key = $1 SUBSEP $3
  if (!(key in seen)) { seen[key] = 1; order[++n] = key; name[key] = $1; goal[key] = $3; gpus[key] = $2 }
  value = $3 == "cost" ? $8 : $6
  if ($5 == "hybrid") hybrid[key] = value; else { ilp[key] = value; status[key] = $10; gap[key] = $11 }
} END {
  print "| scenario | GPUs | goal | ILP status | ILP | hybrid | hybrid behind the ILP |"
  print "|---|---|---|---|---|---|---|"
  for (i = 1; i <= n; ++i) {
    k = order[i]; unit = goal[k] == "cost" ? " $/1k" : " /s"
    behind = ""
    if (status[k] == "optimal" && ilp[k] > 0) {
      d = goal[k] == "cost" ? (hybrid[k] > 0 ? hybrid[k] / ilp[k] - 1 : 1) : 1 - hybrid[k] / ilp[k]
      behind = sprintf("%.2f%%", 100 * d)
      if (d > worst[goal[k]]) worst[goal[k]] = d
      proven[goal[k]]++
    }
    printf "| %s | %d | %s | %s | %.3f%s | %.3f%s | %s |\n", name[k], gpus[k], goal[k], status[k], ilp[k], unit, hybrid[k], unit, behind
  }
  for (g in proven) printf "\n%s: the ILP proved %d; hybrid at most %.2f%% behind", g, proven[g], 100 * worst[g]
  print ""
}' "$csv"
echo "rows: $csv"
