#!/usr/bin/env bash
# Every folder of results/headline, under the experiment's learning model (the fitted skills model):
#   <cluster>                  ranked by time to target (target 0.8, the HRFS setup)
#   <cluster>-target88         time to target 0.88, above what any constant configuration reaches
#   <cluster>-budget           best accuracy within the budget (600 s gavel-12, 1,800 s hrfs-lab)
#   <cluster>-budget-nopbt     the same with PBT switched off (perturbation interval = stop iterations)
#   <cluster>-budget-bell      the same under the older bell model, for comparison
#   <cluster>-budget-short     best accuracy within a short budget (200 s gavel-12, 600 s hrfs-lab)
#   <cluster>-budget-draws     the budget sweep in 20 draws of the learning model's parameters x 10 seeds
#   <cluster>-sensitivity      200 perturbed worlds x 10 seeds, by time to target
# Each folder holds the sweep and its printed ranking (ranking.txt). variants/run.sh: leader-fusion's settings.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=configs/experiments/pbt-resnet18-cifar10.toml
OUT=results/headline
JOBS=${JOBS:-2}
declare -A BUDGET=([gavel-12]=600 [hrfs-lab]=1800) SHORT=([gavel-12]=200 [hrfs-lab]=600)
for c in gavel-12 hrfs-lab; do
  common=(--seeds 20 --jobs "$JOBS" --quiet --force --set "cluster.path=configs/clusters/$c.toml")
  budget=(--set "experiment.budget_s=${BUDGET[$c]}" --set 'experiment.objective="best_accuracy_at_budget"')
  run() { local name=$1; shift; hetune sweep "$EXP" "$@" --out "$OUT/$name" > "$OUT/$name.txt"; mv "$OUT/$name.txt" "$OUT/$name/ranking.txt"; }
  run "$c" "${common[@]}"
  run "$c-target88" "${common[@]}" --set experiment.target_accuracy=0.88
  run "$c-budget" "${common[@]}" "${budget[@]}"
  run "$c-budget-nopbt" "${common[@]}" "${budget[@]}" --set pbt.perturbation_interval=1000
  run "$c-budget-bell" "${common[@]}" "${budget[@]}" --set 'learning.kind="bell"'
  run "$c-budget-short" "${common[@]}" --set "experiment.budget_s=${SHORT[$c]}" \
    --set 'experiment.objective="best_accuracy_at_budget"'
  run "$c-budget-draws" --seeds 10 --draws 20 --jobs "$JOBS" --quiet --force \
    --set "cluster.path=configs/clusters/$c.toml" "${budget[@]}"
  run "$c-sensitivity" --seeds 10 --jobs "$JOBS" --quiet --force --set "cluster.path=configs/clusters/$c.toml" \
    --sensitivity 200
done
find "$OUT" -maxdepth 1 -name '*.replaced-*' -exec rm -rf {} +
