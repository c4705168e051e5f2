#!/usr/bin/env bash
# then8.sh PID NAME...: wait for process PID (a 4-repeat queue) to end, then resume NAME... to 8 repeats.
cd "$(dirname "$0")" || exit 1
pid=$1; shift
while kill -0 "$pid" 2> /dev/null; do sleep 30; done
./queue.sh 8 "$@"
