#!/usr/bin/env bash
# A/B of HRW.Cluster.owner/2: this package (cluster/) against a baseline (BASE,
# default /tmp/cluster-base: the folder of the Mix project that holds HRW.Cluster in
# a tree made with `git archive <commit> | tar -x -C DIR`, DIR/cluster, or DIR itself
# for a tree whose root project holds HRW.Cluster), both
# compiled with MIX_ENV=prod; RUNS interleaved VM runs of each, each printing the
# ns per lookup of its rounds; then the medians over all rounds and their ratio,
# and the median of the per-pair ratios (each pair ran back to back, so it saw
# about the same load). AB_LEASE=ms runs both sides with a lease (see the .exs);
# epmd is started for it.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-/tmp/cluster-base}
RUNS=${RUNS:-5}
export MIX_ENV=prod
script=$PWD/bench/cluster_owner_ab.exs
# Compiled first, so no run includes a build.
(cd "$BASE" && mix compile >/dev/null) && mix compile >/dev/null
if [ -n "${AB_LEASE:-}" ]; then epmd -daemon; fi
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a=(); b=(); r=()
for i in $(seq 1 "$RUNS"); do
  la=$(cd "$BASE" && mix run "$script" | tail -1); echo "run $i base:    $la"; a+=($la)
  lb=$(mix run "$script" | tail -1);               echo "run $i current: $lb"; b+=($lb)
  r+=($(awk -v a="$(median $la)" -v b="$(median $lb)" 'BEGIN {printf "%.3f", b/a}'))
done
echo "per-pair ratios current/base (medians of each run): ${r[*]}; their median $(median "${r[@]}")"
ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
echo "median ns/lookup: base $ma, current $mb, current/base $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b/a}')"
