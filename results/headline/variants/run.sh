#!/usr/bin/env bash
# The bounded design effort of "An honest simulator" item 7: leader-fusion's settings that could
# change its standing (fair_start, others, fuse_workers), each swept with every registered strategy on both
# clusters, by time to target and by best accuracy at a short and a long budget.
# Each <variant>-<cluster>-<mode> folder holds the sweep and its printed ranking (ranking.txt).
set -euo pipefail
cd "$(dirname "$0")/../../.."
EXP=configs/experiments/pbt-resnet18-cifar10.toml
OUT=results/headline/variants
# every variant states all three settings, so none depends on what the experiment file ships
LF=strategies.leader-fusion
declare -A VARIANT=(
  [whole-node]="$LF.fuse_workers=0 $LF.others=\"least-progressed\" $LF.fair_start=false"
  [others-rank-aware]="$LF.fuse_workers=0 $LF.others=\"rank-aware\" $LF.fair_start=false"
  [fair-start]="$LF.fuse_workers=0 $LF.others=\"least-progressed\" $LF.fair_start=true"
  [fuse2-others-rank-aware]="$LF.fuse_workers=2 $LF.others=\"rank-aware\" $LF.fair_start=false"
  [fuse3-others-rank-aware]="$LF.fuse_workers=3 $LF.others=\"rank-aware\" $LF.fair_start=false"
)
declare -A BUDGETS=([gavel-12]="200 600" [hrfs-lab]="600 1800")
for v in "${!VARIANT[@]}"; do
  for c in gavel-12 hrfs-lab; do
    sets=()
    for kv in ${VARIANT[$v]}; do sets+=(--set "$kv"); done
    common=(--seeds 20 --jobs 2 --quiet --force --set "cluster.path=configs/clusters/$c.toml" "${sets[@]}")
    hetune sweep "$EXP" "${common[@]}" --out "$OUT/$v-$c" > "$OUT/$v-$c.txt"
    for b in ${BUDGETS[$c]}; do
      hetune sweep "$EXP" "${common[@]}" --out "$OUT/$v-$c-budget$b" --set "experiment.budget_s=$b" \
        --set 'experiment.objective="best_accuracy_at_budget"' > "$OUT/$v-$c-budget$b.txt"
    done
  done
done
# the shipped setting (fuse3-others-rank-aware) in 200 perturbed worlds, by time to target
for c in gavel-12 hrfs-lab; do
  hetune sweep "$EXP" --seeds 10 --jobs 2 --quiet --force --set "cluster.path=configs/clusters/$c.toml" \
    --set "$LF.fuse_workers=3" --set "$LF.others=\"rank-aware\"" --sensitivity 200 \
    --out "$OUT/fuse3-others-rank-aware-$c-sensitivity" > "$OUT/fuse3-others-rank-aware-$c-sensitivity.txt"
done
find "$OUT" -name '*.replaced-*' -prune -exec rm -rf {} +
