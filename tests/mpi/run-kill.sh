#!/bin/sh
# run-kill.sh ZIMPRUN T_KILL: failure scenarios of the launcher and the library.
#  - a rank killed mid-Recv / mid-Bcast / mid-Barrier (also the rank that releases
#    the barriers) / amid non-blocking collectives
#    (MPI_ERRORS_RETURN), or amid large messages copied by both ranks: the others' calls
#    fail, zimprun names the rank and the signal and exits 128+9;
#  - the same under MPI_ERRORS_ARE_FATAL: the others abort cleanly;
#  - zimprun killed with SIGKILL: its ranks die, the cleanup process removes
#    the channels;
#  - SIGTERM and SIGINT to zimprun: forwarded, exit 128+signal.
# After each: no channel of the job in /dev/shm. Hang bounds are generous.
zimprun=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

shm_clean() {   # job, seconds to wait for the cleanup process
    i=0
    while ls /dev/shm | grep -qF "zimp.$1."; do
        i=$((i + 1))
        [ $i -gt $(($2 * 10)) ] && { fail "$1: left in /dev/shm: $(ls /dev/shm | grep -F "zimp.$1.")"; return; }
        sleep 0.1
    done
}

victim_case() {   # mode, ranks, expected survivor lines[, victim rank (default: the last)]
    job=mk$$$1$2
    victim=${4:-$(($2 - 1))}
    timeout 60 "$zimprun" -n "$2" --job "$job" -- "$prog" "$1" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc = 137 ] || fail "$1 n=$2: exit status $rc, expected 137"
    grep -q "rank $victim (pid [0-9]*) was killed by signal 9" "$tmp/err" || fail "$1 n=$2: no report of the victim"
    got=$(grep -c survivor "$tmp/out")
    [ "$got" = "$3" ] || fail "$1 n=$2: $got survivors reported, expected $3"
    cat "$tmp/out" "$tmp/err"
    shm_clean "$job" 1
}

victim_case recv 4 3
victim_case recv 2 1
victim_case bcast 3 2
victim_case barrier 4 3
victim_case barrier 2 1
victim_case barrier0 4 3 0
victim_case barrier_lead 4 3 0
victim_case nbc 4 3
victim_case nbc 2 1
victim_case coop 2 1
export ZIMP_MPI_CMA=0            # the stream case needs streamed transfers
victim_case stream 2 1
unset ZIMP_MPI_CMA
victim_case fds 3 2
victim_case fatal 4 0
grep -q "aborting the job" "$tmp/err" || fail "fatal: the survivors did not abort"

children() {   # pid: its child processes, from /proc (no procps needed)
    parent=$1
    for st in /proc/[0-9]*/stat; do
        set -- $(cat "$st" 2>/dev/null)
        [ "${4:-}" = "$parent" ] && echo "$1"
    done
    return 0
}

# Waits until every rank printed "ready", then notes zimprun's children.
start_hang() {   # job, ranks
    "$zimprun" -n "$2" --job "$1" -- "$prog" hang >"$tmp/out" 2>"$tmp/err" &
    zpid=$!
    i=0
    while [ "$(grep -c ready "$tmp/out")" != "$2" ]; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "$1: ranks never got ready"; break; }
        sleep 0.1
    done
    kids=$(children $zpid)
    [ -n "$kids" ] || fail "$1: found no rank processes"
}

all_gone() {   # pids, seconds
    i=0
    for p in $1; do
        while kill -0 "$p" 2>/dev/null && [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" != Z ]; do
            i=$((i + 1))
            [ $i -gt $(($2 * 10)) ] && { fail "process $p outlived zimprun"; return; }
            sleep 0.1
        done
    done
}

job=mk$$k9
start_hang $job 4
kill -9 $zpid
wait $zpid 2>/dev/null
all_gone "$kids" 15
shm_clean $job 15
echo "kill -9 of zimprun: its ranks are gone, nothing left in /dev/shm"

for spec in TERM:15 INT:2; do
    sig=${spec%:*}
    job=mk$$$sig
    start_hang $job 3
    kill -$sig $zpid
    wait $zpid
    rc=$?
    want=$((128 + ${spec#*:}))
    [ $rc = $want ] || fail "SIG$sig: exit status $rc, expected $want"
    all_gone "$kids" 15
    shm_clean $job 5
    echo "SIG$sig to zimprun: forwarded, exit status $rc"
done

[ $fails = 0 ] && echo "run-kill.sh: all scenarios passed"
[ $fails = 0 ]
