#!/bin/sh
# run-peer.sh MPICC MPIRUN EXAMPLES_DIR: the same examples built with another
# MPI's mpicc and run with its launcher on 2 ranks (exit 77, skipped, when
# that MPI is not installed).
mpicc=$1 mpirun=$2 src=$3
command -v "$mpicc" >/dev/null 2>&1 && command -v "$mpirun" >/dev/null 2>&1 || {
    echo "$mpicc or $mpirun not installed: skipped"
    exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -e
for ex in hello ring pi; do
    "$mpicc" -O2 "$src/$ex.c" -o "$tmp/$ex" -lm
done
extra=
case $("$mpirun" --version 2>&1) in
    *Open\ MPI*|*OpenRTE*) extra="--oversubscribe"; [ "$(id -u)" = 0 ] && extra="$extra --allow-run-as-root" ;;
esac
out=$(timeout 120 "$mpirun" $extra -np 2 "$tmp/hello")
[ "$(echo "$out" | grep -c 'token 42')" = 2 ] || { echo "hello: $out"; exit 1; }
timeout 120 "$mpirun" $extra -np 2 "$tmp/ring" | grep -q "visited 2 ranks, allreduce ok"
timeout 120 "$mpirun" $extra -np 2 "$tmp/pi" | grep -q "(ok)"
echo "examples built with $mpicc and run with $mpirun on 2 ranks"
