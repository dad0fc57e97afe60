#!/bin/sh
# test_osu.sh IMPL BINARY [ZIMPRUN]: the OSU-style benchmark at 2 ranks, sizes
# 1 B to 64 KiB, every iteration's data checked (--check). Every test and size
# must print one line ending in ",ok". For zimp, no channel of the job may be
# left in /dev/shm. Exit 77 (skipped) when the binary or launcher is missing.
impl=$1 bin=$2 zimprun=${3:-}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "skip: osu benchmark for $impl not built (needs mpicc.$impl; not built in sanitizer builds)"
    exit 77
fi
command -v timeout >/dev/null 2>&1 || { echo "skip: timeout(1) missing"; exit 77; }
job=osu$$
case $impl in
zimp)
    [ -x "$zimprun" ] || { echo "skip: zimprun missing"; exit 77; }
    set -- "$zimprun" -n 2 --job "$job" -- "$bin" ;;
openmpi)
    command -v mpirun.openmpi >/dev/null 2>&1 || { echo "skip: mpirun.openmpi missing"; exit 77; }
    set -- mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 2 "$bin" ;;
mpich)
    command -v mpiexec.mpich >/dev/null 2>&1 || { echo "skip: mpiexec.mpich missing"; exit 77; }
    set -- mpiexec.mpich -n 2 "$bin" ;;
*)
    echo "test_osu.sh: unknown implementation $impl"; exit 2 ;;
esac
out=$(timeout 100 "$@" --check --max 64k --reps 1 --target-ms 2 --label "$impl" 2>&1)
rc=$?
echo "$out"
if [ "$impl" = zimp ]; then
    left=$(ls /dev/shm | grep -F "zimp.$job." || true)
    [ -z "$left" ] || { echo "FAIL: channels left in /dev/shm: $left"; exit 1; }
fi
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
# lat, bw, bcast, gather: 9 sizes (1 B .. 64 KiB by 4); allreduce 8 (from 4 B); barrier 1
lines=$(echo "$out" | grep -c "^$impl,")
bad=$(echo "$out" | grep "^$impl," | grep -vc ',ok$')
if [ "$lines" -ne 45 ] || [ "$bad" -ne 0 ]; then
    echo "FAIL: $lines result lines (want 45), $bad not ok"
    exit 1
fi
echo "ok"
