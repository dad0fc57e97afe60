#!/bin/sh
# run-trace.sh ZIMPRUN T_TRACE ZIMP: runs t_trace at 2 ranks with ZIMP_TRACE at
# the levels debug, info and error, reads the archives back with
# `zimp trace show` and checks the MPI layer's events (docs/tracing.md).
# Skipped (77) where libzimp was built without OTF2.
zimprun=$1 prog=$2 zimp=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() {   # level, pattern (grep -E), expected count
    n=$(grep -cE "$2" "$tmp/$1.txt")
    [ "$n" = "$3" ] || fail "$1: $n lines match '$2', expected $3"
}

for level in debug info error; do
    ZIMP_TRACE=$level,file=$tmp/$level "$zimprun" -n 2 -- "$prog" >/dev/null || fail "$level: t_trace failed"
    if ! "$zimp" trace show "$tmp/$level" >"$tmp/$level.txt" 2>"$tmp/err"; then
        grep -q "OTF2" "$tmp/err" && exit 77
        fail "$level: zimp trace show: $(cat "$tmp/err")"
    fi
done
w='comm=MPI_COMM_WORLD ctx=[0-9]+'
for level in debug info; do
    has $level 'mpi_init "rank=0 size=2 pid=[0-9]+ job=' 1
    has $level 'mpi_init "rank=1 size=2 pid=[0-9]+ job=' 1
    has $level 'mpi_finalize "rank=[01] size=2 ' 2
done
has debug "mpi_send \"call=MPI_Send rank=0 $w peer=1 tag=7 length=64\"" 1
has debug "mpi_recv \"call=MPI_Recv rank=1 $w peer=0 tag=7 length=64\"" 1
has debug "mpi_send \"call=MPI_Isend rank=1 $w peer=0 tag=8 length=40\"" 1
has debug "mpi_recv \"call=MPI_Recv rank=0 $w peer=1 tag=8 length=40\"" 1
has debug "mpi_coll \"call=MPI_Bcast rank=[01] $w root=1 length=4\"" 2
has debug "mpi_coll \"call=MPI_Allreduce rank=[01] $w root=-1 length=4\"" 2
for level in debug info error; do
    has $level "mpi_error \"call=MPI_Send rank=[01] $w class=6: invalid rank\"" 2
done
has info 'mpi_(send|recv|coll)' 0
has error 'mpi_(init|finalize|send|recv|coll)' 0
[ $fails = 0 ] || { cat "$tmp/debug.txt"; exit 1; }
echo "run-trace: the MPI layer's events at the levels debug, info and error"
