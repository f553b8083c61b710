#!/usr/bin/env bash
# Runs every planner on every scenario under benchmarks/scenarios (Release build), writes
# benchmarks/out/planners.csv and prints a Markdown table: each planner's samples/s, hybrid's
# ratio to the best baseline (verl, streamrl, homogeneous), planning seconds, and the
# geometric mean of the ratio over the heterogeneous and the homogeneous scenarios.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
csv="$root/benchmarks/out/planners.csv"
"$root/build/release/benchmarks/planners" "$root"/benchmarks/scenarios/*/ > "$csv"
awk -F, 'NR > 1 {
  key = $1; gpus[key] = $2; sps[key, $3] = $4; secs[key, $3] = $5
  if ($3 == "ilp") { status[key] = $7; gap[key] = $8; build[key] = $9; solve[key] = $10; configs[key] = $6; kept[key] = $11 }
  if (!(key in seen)) { seen[key] = 1; order[++n] = key }
} END {
  print "| scenario | GPUs | verl | streamrl | homogeneous | hybrid | hybrid / best baseline | hybrid s |"
  print "|---|---|---|---|---|---|---|---|"
  for (i = 1; i <= n; ++i) {
    k = order[i]
    best = sps[k, "verl"]; if (sps[k, "streamrl"] > best) best = sps[k, "streamrl"]
    if (sps[k, "homogeneous"] > best) best = sps[k, "homogeneous"]
    ratio = best > 0 ? sps[k, "hybrid"] / best : 0
    printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2f |\n", k, gpus[k], sps[k, "verl"],
           sps[k, "streamrl"], sps[k, "homogeneous"], sps[k, "hybrid"], ratio, secs[k, "hybrid"]
    if (k ~ /^homog-/) { lh += log(ratio); nh++ } else { lx += log(ratio); nx++ }
  }
  printf "\ngeometric mean of hybrid / best baseline: %.3fx over %d heterogeneous scenarios, %.3fx over %d homogeneous\n",
         exp(lx / nx), nx, exp(lh / nh), nh
  print "\n| scenario | GPUs | ILP status | configurations (kept) | gap | build s | solve s | ILP samples/s | hybrid below the ILP |"
  print "|---|---|---|---|---|---|---|---|---|"
  for (i = 1; i <= n; ++i) {
    k = order[i]
    if (status[k] == "refused" || status[k] == "build time limit") { printf "| %s | %d | %s | %s in the space | | | | | |\n", k, gpus[k], status[k], configs[k]; continue }
    d = sps[k, "ilp"] > 0 ? 1 - sps[k, "hybrid"] / sps[k, "ilp"] : 0
    printf "| %s | %d | %s | %s (%s) | %s | %.2f | %.2f | %.2f | %.2f%% |\n", k, gpus[k], status[k], configs[k], kept[k], gap[k], build[k], solve[k], sps[k, "ilp"], 100 * d
  }
}' "$csv"
echo "rows: $csv"
