#!/usr/bin/env bash
# after.sh PID REPEATS NAME...: wait for process PID (a build or a queue) to end, then queue.sh REPEATS NAME...
cd "$(dirname "$0")" || exit 1
pid=$1; shift
while kill -0 "$pid" 2> /dev/null; do sleep 20; done
./queue.sh "$@"
