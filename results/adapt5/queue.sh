#!/usr/bin/env bash
# queue.sh REPEATS NAME...: build (or resume) each scenario's table on the shared clock, one after another.
cd "$(dirname "$0")/../.." && . .venv/bin/activate
reps=$1; shift
for name in "$@"; do
  out=results/adapt5/$name.csv
  if [ -f "$out" ]; then extra=(--resume); else extra=(--clock results/adapt5/clock.json); fi
  echo "$(date +%T) start $name ${extra[*]} -> $reps" >> results/adapt5/queue.log
  hetune adapt build-table configs/adapt/adapt-convnet-$name.toml --out "$out" --repeats "$reps" --seed 200 "${extra[@]}" >> results/adapt5/$name.log 2>&1
  echo "$(date +%T) end $name rc=$?" >> results/adapt5/queue.log
done
