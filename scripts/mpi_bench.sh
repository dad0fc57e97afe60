#!/usr/bin/env bash
# zimp's MPI layer against Open MPI and MPICH, side by side in one run: the
# OSU-style benchmark bench/osu/osu.c built three times (zimpcc against this
# tree's libzimp-mpi, mpicc.openmpi, mpicc.mpich, all -O2), each run with its
# own launcher at 2 and 4 ranks. Every repeat runs every (ranks, test) for the
# three implementations back to back, in an order rotated per repeat, so
# noise hits all alike. Each run has a time limit; a run that hits it is
# reported "n/a (timed out after S s)" and not tried again in later repeats.
# Writes bench/results/<UTC time>-mpi/: raw.csv, summary.csv, table.txt,
# meta.txt (machine, versions, load before/after, the exact command).
#   ./scripts/mpi_bench.sh [--repeats R] [--np "2 4"] [--tests lat,bw,...]
#       [--max BYTES] [--target-ms T] [--timeout S] [--out DIR] [--quick]
# --quick: 1 repeat, sizes up to 64 KiB (a smoke run, about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cmdline="$0 $*"

repeats=3 nps="2 4" tests="lat,bw,bcast,barrier,allreduce,gather" max=4194304
target_ms=30 limit=60 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) repeats=$2; shift ;;
    --np) nps=$2; shift ;;
    --tests) tests=$2; shift ;;
    --max) max=$2; shift ;;
    --target-ms) target_ms=$2; shift ;;
    --timeout) limit=$2; shift ;;
    --out) out=$2; shift ;;
    --quick) repeats=1 max=65536 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "mpi_bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
stamp=$(date -u +%Y%m%d-%H%M%S)
out=${out:-bench/results/$stamp-mpi}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# ---- build: libzimp-mpi, zimprun and zimpcc in build-osu/, then osu.c three times ----
bdir=$root/build-osu
cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bdir" --target zimp-mpi zimprun >/dev/null
mkdir -p "$bdir/osu"
declare -A bin note
impls=(zimp openmpi mpich)
for impl in "${impls[@]}"; do
  case $impl in
    zimp) cc=$bdir/tools/mpi/zimpcc ;;
    *) cc=$(command -v "mpicc.$impl" || true) ;;
  esac
  bin[$impl]=""
  if [ -z "$cc" ] || [ ! -x "$cc" ]; then
    note[$impl]="n/a (no compiler wrapper for $impl)"
  elif "$cc" -O2 -std=c11 -Wall -Wextra bench/osu/osu.c -o "$bdir/osu/osu_$impl"; then
    bin[$impl]=$bdir/osu/osu_$impl
  else
    note[$impl]="n/a (build with $cc failed)"
  fi
done

launch() {   # launch IMPL NP: the launcher's command line, one word per line
  case $1 in
    zimp) printf '%s\n' "$bdir/tools/mpi/zimprun" -n "$2" -- ;;
    openmpi) printf '%s\n' mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
               --mca btl self,vader -np "$2" ;;
    mpich) printf '%s\n' mpiexec.mpich -n "$2" ;;
  esac
}

shm_before=$(ls /dev/shm | grep -c '^zimp\.' || true)
{
  echo "command: $cmdline"
  echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "zimp: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (src/ modified)')"
  echo "openmpi: $(mpirun.openmpi --version 2>/dev/null | head -1 || echo none)"
  echo "mpich: $(mpichversion 2>/dev/null | head -1 | tr -s ' \t' ' ' || echo none)"
  echo "cc: $(cc --version | head -1)"
  for impl in "${impls[@]}"; do
    echo "launcher $impl: $(launch "$impl" N | tr '\n' ' ')${bin[$impl]:-${note[$impl]}} --tests T --max $max --target-ms $target_ms --label $impl"
  done
  echo "repeats: $repeats, ranks: $nps, tests: $tests, sizes: 1 B to $max B by 4, time limit per run: $limit s"
  echo "load before: $(cut -d' ' -f1-4 /proc/loadavg)"
} > "$out/meta.txt"
cat "$out/meta.txt"

raw=$out/raw.csv
echo "repeat,impl,test,np,size,value,unit,iters,min,max,status" > "$raw"
declare -A gave_up
t_start=$(date +%s)
IFS=, read -ra test_list <<< "$tests"
for ((r = 1; r <= repeats; r++)); do
  for np in $nps; do
    for test in "${test_list[@]}"; do
      for ((k = 0; k < ${#impls[@]}; k++)); do
        impl=${impls[(k + r + np) % ${#impls[@]}]}
        key=$impl.$np.$test
        if [ -z "${bin[$impl]}" ]; then
          echo "$r,$impl,$test,$np,*,nan,,0,nan,nan,${note[$impl]}" >> "$raw"; continue
        fi
        if [ -n "${gave_up[$key]:-}" ]; then
          echo "$r,$impl,$test,$np,*,nan,,0,nan,nan,${gave_up[$key]}" >> "$raw"; continue
        fi
        mapfile -t l < <(launch "$impl" "$np")
        set +e
        res=$(timeout -k 5 "$limit" "${l[@]}" "${bin[$impl]}" --tests "$test" --max "$max" \
                --target-ms "$target_ms" --budget $((limit * 3 / 4)) --label "$impl" 2>"$out/stderr.tmp")
        rc=$?
        set -e
        grep "^$impl," <<< "$res" | sed "s/^/$r,/" >> "$raw" || true
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
          gave_up[$key]="n/a (timed out after $limit s)"
          echo "$r,$impl,$test,$np,*,nan,,0,nan,nan,${gave_up[$key]}" >> "$raw"
        elif [ $rc -ne 0 ]; then
          echo "$r,$impl,$test,$np,*,nan,,0,nan,nan,n/a (exit status $rc: $(tail -1 "$out/stderr.tmp" | tr ',' ';'))" >> "$raw"
        fi
        printf 'repeat %d/%d  np %s  %-9s %-8s %s\n' "$r" "$repeats" "$np" "$test" "$impl" \
          "$([ $rc -eq 0 ] && echo ok || echo "exit $rc")"
      done
    done
  done
done
rm -f "$out/stderr.tmp"
t_end=$(date +%s)
{
  echo "finished: $(date -u '+%Y-%m-%d %H:%M:%S UTC') ($((t_end - t_start)) s of runs)"
  echo "load after: $(cut -d' ' -f1-4 /proc/loadavg)"
  echo "zimp channels in /dev/shm before/after: $shm_before/$(ls /dev/shm | grep -c '^zimp\.' || true)"
} >> "$out/meta.txt"
tail -3 "$out/meta.txt"

python3 bench/osu/table.py "$out" | tee "$out/table.txt"
echo "results in ${out#"$root"/}"
