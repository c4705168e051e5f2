#!/usr/bin/env bash
# queue.sh REPEATS NAME...: build (or resume) each scenario's table on the shared convnet3 clock, one after another.
cd "$(dirname "$0")/../.." && . .venv/bin/activate
reps=$1; shift
for name in "$@"; do
  out=results/adapt6/$name.csv
  if [ -f "$out" ]; then extra=(--resume); else extra=(--clock results/adapt6/clock.json); fi
  echo "$(date +%T) start $name ${extra[*]} -> $reps" >> results/adapt6/queue.log
  hetune adapt build-table configs/adapt/adapt-convnet3-$name.toml --out "$out" --repeats "$reps" --seed 200 "${extra[@]}" >> results/adapt6/$name.log 2>&1
  echo "$(date +%T) end $name rc=$?" >> results/adapt6/queue.log
done
