#!/usr/bin/env bash
# Writes the paper-setting scenarios (benchmarks/paper/README.md): four networks over the same
# 64 GPUs (24 A100, 24 L40S, 16 L4) and twelve workloads (Qwen3 4B, 8B and 14B; PPO and GRPO;
# sync and async). Run after changing a scenario below; the outputs are committed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
"$root/scripts/build" Release >/dev/null
tool="$root/build/release/apps/hetrl-cluster"
mkdir -p "$here/clusters" "$here/workloads"

cluster() {  # name, zone of the A100s, of the L40Ss, of the L4s, links...
  local name=$1 a100=$2 l40s=$3 l4=$4; shift 4
  "$tool" --name "paper-$name" --preset-node "$a100:3xp4d.24xlarge" --preset-node "$l40s:3xg6e.48xlarge" \
          --preset-node "$l4:2xg6.48xlarge" "$@" -o "$here/clusters/$name.json" >/dev/null
}
# One region: the three node types in one zone.
cluster region us-east-1a us-east-1a us-east-1a
# Multi-region hybrid: two regions about 10 ms and 5 Gbps apart, the L4 nodes at an edge site
# behind 1 Gbps links.
cluster hybrid us-east-1a us-east-2a edge-1a \
  --link us-east-1a,us-east-2a:gbps=5,latency_ms=10 \
  --link us-east-1a,edge-1a:gbps=1,latency_ms=10 --link us-east-2a,edge-1a:gbps=1,latency_ms=10
# Multi-country: three countries of one continent, 5 to 30 ms apart (5 Gbps assumed).
cluster country eu-central-1a eu-west-3a eu-south-1a \
  --link eu-central-1a,eu-west-3a:gbps=5,latency_ms=5 \
  --link eu-central-1a,eu-south-1a:gbps=5,latency_ms=20 --link eu-west-3a,eu-south-1a:gbps=5,latency_ms=30
# Multi-continent: two regions of one continent 5 ms and 5 Gbps apart, the L4 nodes on
# another continent 55 to 60 ms and 0.9 Gbps away.
cluster continent us-east-1a us-east-2a eu-west-1a \
  --link us-east-1a,us-east-2a:gbps=5,latency_ms=5 \
  --link us-east-1a,eu-west-1a:gbps=0.9,latency_ms=60 --link us-east-2a,eu-west-1a:gbps=0.9,latency_ms=55

workload() {  # algorithm, size, mode
  local algorithm=$1 size=$2 mode=$3
  local model="Qwen3-${size^^}" critic="" async=""
  [ "$algorithm" = ppo ] && critic="\"critic\": \"$model\", "
  [ "$mode" = async ] && async='
  "mode": "async",
  "max_staleness": 1,'
  cat > "$here/workloads/$algorithm-$size-$mode.json" <<JSON
{
  "schema": "hetrl.workload/v1",
  "name": "$algorithm-qwen3-$size-$mode",
  "algorithm": "$algorithm",${async}
  "models": {"actor": "$model", ${critic}"reference": "$model", "reward": "$model"},
  "prompts_per_iteration": 128,
  "samples_per_prompt": 8,
  "prompt_length_tokens": 512,
  "response_length": {"distribution": "lognormal", "mean_tokens": 512, "max_tokens": 1024},
  "mini_batches": 4
}
JSON
}
for algorithm in ppo grpo; do
  for size in 4b 8b 14b; do
    for mode in sync async; do workload "$algorithm" "$size" "$mode"; done
  done
done
echo "wrote $(ls "$here"/clusters | wc -l) clusters and $(ls "$here"/workloads | wc -l) workloads under benchmarks/paper/"
