#!/bin/sh
# An A/B of bench/native_ab.exs (or of SCRIPT, a bench script printing
# "case<TAB>figure unit" lines): checkouts A and B (each already compiled with
# MIX_ENV=prod), run in turn, A B A B ..., one warm-up run of each first (not
# counted), then PAIRS counted pairs (default 7). Prints every run's lines, then
# per case the median of each side, their ratio A/B and the median of the
# pairwise ratios (below 1: A is faster).
#   bench/native_ab.sh /path/to/A /path/to/B [PAIRS [SCRIPT]] > raw.txt
# BENCH_QUICK=1 makes each run short (a check that the harness works).
set -eu
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
pairs=${3:-7}
script=${4:-$(cd "$(dirname "$0")" && pwd)/native_ab.exs}
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run() { # side, checkout, counted?
  (cd "$2" && MIX_ENV=prod mix run "$script") | while IFS= read -r line; do
    printf '%s\t%s\t%s\n' "$1" "$3" "$line"
  done
}

run A "$a" warmup >>"$out"
run B "$b" warmup >>"$out"
i=1
while [ "$i" -le "$pairs" ]; do
  run A "$a" "$i" >>"$out"
  run B "$b" "$i" >>"$out"
  i=$((i + 1))
done

echo "# A = $a ($(git -C "$a" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "# B = $b ($(git -C "$b" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "# $pairs pairs, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## runs (side, run, case, figure)"
cat "$out"
echo "## summary: case, median A, median B, A/B of the medians, median of the pairwise A/B"
awk -F'\t' '$2 != "warmup" {
  split($4, f, " "); v = f[1] + 0; unit = f[2]; c = $3
  units[c] = unit; if (!(c in order)) { order[c] = ++n; names[n] = c }
  vals[c, $1, $2] = v; cnt[c, $1]++; runs[$2] = 1
}
function median(arr, k,    i, j, t) {
  for (i = 2; i <= k; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
  return k % 2 ? arr[(k + 1) / 2] : (arr[k / 2] + arr[k / 2 + 1]) / 2
}
END {
  for (x = 1; x <= n; x++) {
    c = names[x]; ka = 0; kb = 0; kr = 0
    delete va; delete vb; delete vr
    for (r in runs) {
      if ((c, "A", r) in vals) va[++ka] = vals[c, "A", r]
      if ((c, "B", r) in vals) vb[++kb] = vals[c, "B", r]
      if (((c, "A", r) in vals) && ((c, "B", r) in vals)) vr[++kr] = vals[c, "A", r] / vals[c, "B", r]
    }
    ma = median(va, ka); mb = median(vb, kb)
    printf "%-42s A %10.2f  B %10.2f %s  A/B %.3f (%.3f)\n", c, ma, mb, units[c], ma / mb, median(vr, kr)
  }
}' "$out"
