#!/usr/bin/env bash
# The three sweeps of results/faults: the default experiment with no faults, and every node failing
# after exponential uptimes of mean 1,800 s or 600 s, replaced 300 s later.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=configs/experiments/pbt-resnet18-cifar10.toml
OUT=results/faults
hetune sweep "$EXP" --seeds 20 --jobs 2 --quiet --force --out "$OUT/gavel-12-none" > /dev/null
for m in 1800 600; do
  sets=()
  for d in k80 p100 v100; do sets+=(--set "faults.devices.$d.mtbf_s=$m" --set "faults.devices.$d.replace_s=300"); done
  hetune sweep "$EXP" --seeds 20 --jobs 2 --quiet --force --out "$OUT/gavel-12-mtbf$m" "${sets[@]}" > /dev/null
done
find "$OUT" -maxdepth 1 -name '*.replaced-*' -exec rm -rf {} +
