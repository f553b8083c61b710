#!/usr/bin/env bash
# The cost model against the published measurements of benchmarks/calibration/rows.json:
# builds Release, writes benchmarks/out/calibration.csv (measured, predicted, error per row)
# and prints the median and 90th-percentile absolute error per group and split, then the rows
# that cannot be expressed and why. Usage: benchmarks/calibration.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
mkdir -p "$root/benchmarks/out"
"$root/build/release/benchmarks/calibration" "$root/benchmarks/calibration/rows.json" \
  "$root/benchmarks/out/calibration.csv"
echo "rows: $root/benchmarks/out/calibration.csv"
