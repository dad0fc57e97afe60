#!/usr/bin/env bash
# Correctness check of an external peer (openmpi | mpich | iceoryx2 |
# iceoryx2-event): two
# receivers, every byte checked, every output line must say ok.
# Exit 77 (skipped) when the peer was not built: sanitizer builds do not build
# the peers (their own toolchains), and a machine may lack MPI or cargo.
set -u
impl=$1 bin=${2:-}
if [ -n "${ZIMP_SANITIZER:-}" ]; then echo "skip: peers are not built in sanitizer builds"; exit 77; fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "skip: $impl benchmark not built (MPI: needs mpicc.openmpi/mpicc.mpich; iceoryx2: configure with -DZIMP_BENCH_ICEORYX2=ON, as scripts/bench.sh does)"; exit 77
fi
case $impl in
  openmpi) cmd=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 3 "$bin" --label openmpi) ;;
  mpich)   cmd=(mpiexec.mpich -n 3 "$bin" --label mpich) ;;
  iceoryx2-event) cmd=("$bin" --nrecv 2 --events) ;;
  *)       cmd=("$bin" --nrecv 2) ;;
esac
out=$(timeout 100 "${cmd[@]}" --seconds 0.02 --sizes 1,64,5000,100000 --check 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
lines=$(grep -c '^stream,' <<<"$out")
bad=$(grep '^stream,' <<<"$out" | grep -vc ',ok$')
[ "$lines" -ge 4 ] && [ "$bad" -eq 0 ] || { echo "FAIL: $lines result lines, $bad not ok"; exit 1; }
echo "ok"
