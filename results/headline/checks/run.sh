#!/usr/bin/env bash
# Checks of the headline under the fitted learning model (gavel-12, best accuracy at 600 s, 20 seeds):
#   diverge<D>-pi<P>-*         the divergence guess (diverge_eta 4) halved and doubled, with PBT (pi50) and off (pi1000)
#   quiet-readings-*           the fit's reading noise (ar_std, shared_std) off, with PBT and off (-nopbt)
set -euo pipefail
cd "$(dirname "$0")/../../.."
EXP=configs/experiments/pbt-resnet18-cifar10.toml
OUT=results/headline/checks
common=(--seeds 20 --jobs "${JOBS:-2}" --quiet --force --set cluster.path=configs/clusters/gavel-12.toml
        --set experiment.budget_s=600 --set 'experiment.objective="best_accuracy_at_budget"')
run() { local name=$1; shift; hetune sweep "$EXP" "${common[@]}" "$@" --out "$OUT/$name" > "$OUT/$name.txt"; mv "$OUT/$name.txt" "$OUT/$name/ranking.txt"; }
for d in 2 8; do
  for pi in 50 1000; do
    run "diverge$d-pi$pi-gavel-12-budget" --set "learning.params.diverge_eta=$d" --set "pbt.perturbation_interval=$pi"
  done
done
quiet=(--set learning.params.ar_std=0 --set learning.params.shared_std=0)
run quiet-readings-gavel-12-budget "${quiet[@]}"
run quiet-readings-gavel-12-budget-nopbt "${quiet[@]}" --set pbt.perturbation_interval=1000
find "$OUT" -maxdepth 1 -name '*.replaced-*' -exec rm -rf {} +
