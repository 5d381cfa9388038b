#!/usr/bin/env bash
# A/B of HRW.Cluster.owner/2: this tree against a baseline tree (BASE, default
# /tmp/cluster-base, made with `git archive <commit> | tar -x -C BASE`), both
# compiled with MIX_ENV=prod; RUNS interleaved VM runs of each, each printing the
# ns per lookup of its rounds; then the medians and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-/tmp/cluster-base}
RUNS=${RUNS:-5}
export MIX_ENV=prod
script=$PWD/bench/cluster_owner_ab.exs
a=(); b=()
for i in $(seq 1 "$RUNS"); do
  line=$(cd "$BASE" && mix run "$script" | tail -1); echo "run $i base:    $line"; a+=($line)
  line=$(mix run "$script" | tail -1);               echo "run $i current: $line"; b+=($line)
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
echo "median ns/lookup: base $ma, current $mb, current/base $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b/a}')"
