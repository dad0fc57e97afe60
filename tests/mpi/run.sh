#!/bin/sh
# run.sh ZIMPRUN N PROGRAM [ARGS...]
# Runs PROGRAM on N ranks under zimprun with a job name of its own, then
# fails if any channel of that job is left in /dev/shm.
zimprun=$1 n=$2
shift 2
job=mt$$
"$zimprun" -n "$n" --job "$job" -- "$@"
rc=$?
left=$(ls /dev/shm | grep -F "zimp.$job." || true)
if [ -n "$left" ]; then
    echo "run.sh: channels left in /dev/shm: $left"
    exit 1
fi
exit $rc
