#!/usr/bin/env bash
# The paper's evaluation setting (benchmarks/paper/README.md): plans every network x workload
# with hybrid and the baselines of its mode, predicts and simulates each plan, writes
# benchmarks/out/paper.csv and prints the table in the paper's shape: per network, the range
# over the six workloads of each mode (Qwen3 4B, 8B, 14B; PPO, GRPO) of hybrid's throughput
# over verl's (sync), over verl-async's and over streamrl's (async), predicted and simulated,
# next to the paper's reported range. Usage: benchmarks/paper.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
csv="$root/benchmarks/out/paper.csv"
"$root/build/release/benchmarks/paper" "$root/benchmarks/paper/clusters" "$root/benchmarks/paper/workloads" > "$csv"
awk -F, '
  NR == 1 { next }
  { key = $1 SUBSEP $2; pred[key, $6] = $7; sim[key, $6] = $8; nets[$1] = 1; mode[$2] = $5; work[$2] = 1 }
  function update(name, net, value) {
    if (!((name, net) in lo) || value < lo[name, net]) lo[name, net] = value
    if (!((name, net) in hi) || value > hi[name, net]) hi[name, net] = value
  }
  END {
    paper["region", "verl"] = "1.51-2.05"; paper["hybrid", "verl"] = "3.01-4.99"
    paper["country", "verl"] = "1.40-3.07"; paper["continent", "verl"] = "2.24-5.46"
    paper["region", "streamrl"] = "1.10-1.31"; paper["hybrid", "streamrl"] = "1.11-1.27"
    paper["country", "streamrl"] = "1.19-1.50"; paper["continent", "streamrl"] = "2.25-3.72"
    split("region hybrid country continent", order, " ")
    for (i = 1; i <= 4; ++i) {
      net = order[i]
      if (!(net in nets)) continue
      for (w in work) {
        k = net SUBSEP w
        if (mode[w] == "sync") {
          update("p_verl", net, pred[k, "hybrid"] / pred[k, "verl"]); update("s_verl", net, sim[k, "hybrid"] / sim[k, "verl"])
        } else {
          update("p_async", net, pred[k, "hybrid"] / pred[k, "verl-async"]); update("s_async", net, sim[k, "hybrid"] / sim[k, "verl-async"])
          update("p_stream", net, pred[k, "hybrid"] / pred[k, "streamrl"]); update("s_stream", net, sim[k, "hybrid"] / sim[k, "streamrl"])
        }
      }
    }
    print "| network | sync: hybrid / verl (predicted) | simulated | paper | async: hybrid / verl-async (predicted) | simulated | async: hybrid / streamrl (predicted) | simulated | paper |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= 4; ++i) {
      net = order[i]
      if (!(net in nets)) continue
      printf "| %s | %.2f-%.2fx | %.2f-%.2fx | %sx | %.2f-%.2fx | %.2f-%.2fx | %.2f-%.2fx | %.2f-%.2fx | %sx |\n", net,
             lo["p_verl", net], hi["p_verl", net], lo["s_verl", net], hi["s_verl", net], paper[net, "verl"],
             lo["p_async", net], hi["p_async", net], lo["s_async", net], hi["s_async", net],
             lo["p_stream", net], hi["p_stream", net], lo["s_stream", net], hi["s_stream", net], paper[net, "streamrl"]
    }
  }' "$csv"
echo "rows: $csv"
