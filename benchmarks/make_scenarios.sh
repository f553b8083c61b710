#!/usr/bin/env bash
# Writes the benchmark scenarios' clusters with hetrl-cluster (each scenario is a folder with
# cluster.json and workload.json; the workloads are written by hand). Run after changing a
# cluster below; the outputs are committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
tool="$root/build/release/apps/hetrl-cluster"
dir="$root/benchmarks/scenarios"

cluster() {  # name, flags...
  local name=$1; shift
  mkdir -p "$dir/$name"
  "$tool" --name "$name" "$@" > "$dir/$name/cluster.json"
}

# One zone, mixed GPU types.
cluster zone1-a100-l4-16     --node us-east-1a:1x8xA100-SXM-80G:nic_gbps=400 --preset-node us-east-1a:1xg6.48xlarge
cluster zone1-a100-l40s-32   --preset-node us-east-1a:2xp4de.24xlarge --preset-node us-east-1a:2xg6e.48xlarge
cluster zone1-3types-48      --preset-node us-east-1a:2xp5.48xlarge --preset-node us-east-1a:2xp4de.24xlarge \
                             --preset-node us-east-1a:2xg6.48xlarge
cluster zone1-l40s-a10g-16   --preset-node us-east-1a:1xg6e.48xlarge --preset-node us-east-1a:1xg5.48xlarge
# Several zones of one region.
cluster zones2-a100-l40s-64  --preset-node us-east-1a:4xp4de.24xlarge --preset-node us-east-1b:4xg6e.48xlarge
# A dear node and many cheap ones: one A100 node in one zone, eight A10G nodes in another.
cluster zones2-a100-a10g-72  --preset-node us-east-1a:1xp4de.24xlarge --preset-node us-east-1b:8xg5.48xlarge
cluster zones3-mixed-64      --preset-node us-east-1a:2xp5.48xlarge --preset-node us-east-1b:4xp4de.24xlarge \
                             --preset-node us-east-1c:2xg6e.48xlarge
# Several regions, slow links.
cluster regions2-mixed-64    --preset-node us-east-1a:4xp4de.24xlarge --preset-node us-east-1b:2xg6e.48xlarge \
                             --preset-node us-west-2a:2xp5.48xlarge
cluster regions2-h100-l40s-64 --preset-node us-east-1a:4xp5.48xlarge --preset-node eu-west-1a:4xg6e.48xlarge \
                             --link us-east-1a,eu-west-1a:gbps=5,latency_ms=40
cluster regions2-a100-h100-128 --preset-node us-east-1a:8xp4de.24xlarge --preset-node us-west-2a:8xp5.48xlarge \
                             --link us-east-1a,us-west-2a:gbps=5,latency_ms=32
cluster regions3-mixed-256   --preset-node us-east-1a:8xp5.48xlarge --preset-node us-east-1b:8xp4de.24xlarge \
                             --preset-node us-west-2a:8xg6e.48xlarge --preset-node eu-west-1a:8xg6.48xlarge
cluster regions3-mixed-512   --preset-node us-east-1a:16xp5.48xlarge --preset-node us-east-1b:16xp4de.24xlarge \
                             --preset-node us-west-2a:16xg6e.48xlarge --preset-node eu-west-1a:16xg6.48xlarge
cluster zones2-mixed-128     --preset-node us-east-1a:4xp5.48xlarge --preset-node us-east-1a:4xp4de.24xlarge \
                             --preset-node us-east-1b:8xg6e.48xlarge
# Homogeneous.
cluster homog-h100-64        --preset-node us-east-1a:8xp5.48xlarge
cluster homog-a100-32        --preset-node us-east-1a:4xp4de.24xlarge
echo "wrote $(ls -d "$dir"/*/ | wc -l) scenario clusters under benchmarks/scenarios/"
