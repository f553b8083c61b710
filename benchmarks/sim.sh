#!/usr/bin/env bash
# The simulator against the cost model on every scenario (Release build): 10 iterations of
# hybrid's plan with fixed lengths and with the workload's distribution. Writes
# benchmarks/out/sim.csv and prints it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
"$root/build/release/benchmarks/sim_bench" "$root"/benchmarks/scenarios/*/ > "$root/benchmarks/out/sim.csv"
cat "$root/benchmarks/out/sim.csv"
