#!/usr/bin/env bash
# Writes the response-length traces in this folder with `hetrl-sim lengths` (a lognormal
# clamped at the maximum response length, seeded). The parameters and their reasons are in
# traces/README.md; the outputs are committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build" Release >/dev/null
sim="$root/build/release/apps/hetrl-sim"
"$sim" lengths --mean-tokens 350 --max-tokens 1024 --sigma 0.6 --count 2000 --seed 11 \
  -o "$root/traces/short_answers.csv"
"$sim" lengths --mean-tokens 3000 --max-tokens 16384 --sigma 0.9 --count 2000 --seed 12 \
  -o "$root/traces/long_reasoning.csv"
