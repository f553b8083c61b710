#!/usr/bin/env bash
# How repeatable hetrl-profile is on this machine's CPU: RUNS profiles (--backend cpu, --quick
# unless --full) back to back, each figure of the table per run in
# benchmarks/out/profile-repeat.csv, then per figure the median, range and the largest change
# between two runs in a row (|b / a - 1|).
# Usage: benchmarks/profile_repeat.sh [RUNS] [--full]   (default 6 quick runs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-6}
settings=--quick
if [[ "${2:-}" == --full ]]; then settings=; elif [[ -n "${2:-}" ]]; then echo "usage: $0 [RUNS] [--full]" >&2; exit 2; fi
"$root/scripts/build" Release >/dev/null
profile="$root/build/release/apps/hetrl-profile"
out="$root/benchmarks/out/profile-repeat"
mkdir -p "$out"
csv="$root/benchmarks/out/profile-repeat.csv"
echo "run,figure,value" > "$csv"
for run in $(seq "$runs"); do
  "$profile" --backend cpu $settings -o "$out/run-$run.json" >/dev/null
  # The table's rows: a 34-character name, then the measured value.
  "$profile" show "$out/run-$run.json" | awk -v run="$run" '
    /^(figure|GEMM by tokens)/ { table = 1; next }
    /^$/ { table = 0 }
    table && length($0) > 34 {
      name = substr($0, 1, 34); sub(/ +$/, "", name); sub(/^ +/, "", name)
      split(substr($0, 35), v, " "); printf "%d,\"%s\",%s\n", run, name, v[1]
    }' >> "$csv"
done
echo "figure,median,min,max,largest_change_between_runs_in_a_row"
awk -F, 'NR > 1 {
    key = $2; for (i = 3; i < NF; ++i) key = key "," $i   # names may hold commas
    if (!(key in n)) order[++figures] = key
    v[key, ++n[key]] = $NF
  }
  END {
    for (f = 1; f <= figures; ++f) {
      key = order[f]; m = n[key]; worst = 0
      for (i = 1; i <= m; ++i) s[i] = v[key, i]
      for (i = 2; i <= m; ++i) { c = s[i] / s[i - 1] - 1; if (c < 0) c = -c; if (c > worst) worst = c }
      for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
      median = (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
      printf "%s,%.4g,%.4g,%.4g,%.1f%%\n", key, median, s[1], s[m], 100 * worst
    }
  }' "$csv"
echo "rows: $csv"
