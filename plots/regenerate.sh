#!/usr/bin/env bash
# Regenerate the README's figures (plots/figures/) from the shipped default experiment.
set -euo pipefail
cd "$(dirname "$0")/.."
EXP=configs/experiments/pbt-resnet18-cifar10.toml
hetune sweep "$EXP" --strategies all --seeds 20 --jobs 2 --out results/sweep-default --quiet --force
hetune simulate "$EXP" --strategy leader-fusion --seed 0 --out results/default-leader-fusion --force
hetune simulate "$EXP" --strategy tune-default --seed 0 --out results/default-tune-default --force
hetune sweep "$EXP" --strategies all --seeds 20 --jobs 2 --out results/sweep-hrfs-lab --quiet --force \
    --set cluster.path=configs/clusters/hrfs-lab.toml
rm -rf plots/figures
hetune plots results/sweep-default results/sweep-hrfs-lab results/default-leader-fusion \
    results/default-tune-default configs/calibration/reference.toml results/fidelity/spread results/fidelity/digits \
    --out plots/figures
find results -maxdepth 1 -name '*.replaced-*' -exec rm -rf {} +
