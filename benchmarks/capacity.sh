#!/usr/bin/env bash
# hetrl-plan capacity on the large market (benchmarks/capacity/market-6x6.json: 6 instance types
# in 6 zones, 16 to 64 nodes each, one node already paid for) for two workloads at two targets
# each, the search limited to --time-limit seconds (default 50). Release build. Writes
# benchmarks/out/capacity.csv (one line a run: the cluster found, its price and throughput,
# whether the search proved it the cheapest, the least a cluster reaching the target can cost,
# the clusters planned and the seconds the run took) and prints it as a Markdown table.
# Usage: benchmarks/capacity.sh [--time-limit S]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit=50
while [[ $# -gt 0 ]]; do
  case $1 in
    --time-limit) limit=$2; shift 2 ;;
    *) echo "usage: benchmarks/capacity.sh [--time-limit S]" >&2; exit 2 ;;
  esac
done
"$root/scripts/build" Release >/dev/null
out="$root/benchmarks/out/capacity"
mkdir -p "$out"
csv="$root/benchmarks/out/capacity.csv"
echo "workload,target,found_usd_per_hour,found_samples_per_second,found_gpus,proven,lower_bound_usd_per_hour,clusters_planned,seconds" > "$csv"
runs=("scenarios/zone1-a100-l40s-32/workload.json 8" "scenarios/zone1-a100-l40s-32/workload.json 16"
      "paper/workloads/grpo-8b-sync.json 60" "paper/workloads/grpo-8b-sync.json 120")
for run in "${runs[@]}"; do
  read -r workload target <<< "$run"
  name=$(basename "$workload" .json)
  [[ $name == workload ]] && name=$(basename "$(dirname "$workload")")
  json="$out/$name-$target.json"
  start=$(date +%s.%N)
  "$root/build/release/apps/hetrl-plan" capacity --market "$root/benchmarks/capacity/market-6x6.json" \
    --workload "$root/benchmarks/$workload" --target-samples-per-s "$target" --time-limit "$limit" --json "$json" \
    > "$out/$name-$target.txt" 2>&1 || true
  end=$(date +%s.%N)
  /usr/bin/python3 - "$json" "$name" "$target" "$start" "$end" >> "$csv" <<'PY'
import json, sys
path, name, target, start, end = sys.argv[1:]
try:
    r = json.load(open(path))
except OSError:
    print(f"{name},{target},,,,,,,{float(end) - float(start):.1f}")
    sys.exit()
c = r["cheapest"] or {}
bound = r["lower_bound_usd_per_hour"]
print(f"{name},{target},{c.get('usd_per_hour', '')},{c.get('samples_per_second', '')},{c.get('gpus', '')},"
      f"{int(r['proven'])},{'' if bound is None else bound},{r['clusters_planned']},{float(end) - float(start):.1f}")
PY
done
/usr/bin/python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| workload | target samples/s | found $/h | its samples/s | GPUs | proven | bound $/h | gap | planned | s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    found = float(r["found_usd_per_hour"]) if r["found_usd_per_hour"] else None
    bound = float(r["lower_bound_usd_per_hour"]) if r["lower_bound_usd_per_hour"] else None
    gap = f"{100 * (1 - bound / found):.1f}%" if found and bound is not None else "-"
    print(f"| {r['workload']} | {r['target']} | {found or '-'} | {float(r['found_samples_per_second'] or 0):.2f} | "
          f"{r['found_gpus'] or '-'} | {'yes' if r['proven'] == '1' else 'no'} | {bound if bound is not None else '-'} | "
          f"{gap} | {r['clusters_planned']} | {r['seconds']} |")
PY
