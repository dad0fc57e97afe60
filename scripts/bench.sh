#!/usr/bin/env bash
# zimp's benchmark suite in one command: installs dependencies, builds in
# Release (build-bench/), runs the quick benchmark (a few minutes) or, with
# --full, the full one, and writes results and plots to
# bench/results/<UTC time>-<mode>/ (table.txt, raw.csv, summary.csv,
# results.json, *.png). Other arguments go to zimp_bench (see --help there).
#   ./scripts/bench.sh            quick
#   ./scripts/bench.sh --full     full (about 30 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=quick out=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --full) mode=full ;;
    --out) out=${args[i + 1]:-} ;;
  esac
done
if [ -z "$out" ]; then
  out=bench/results/$(date -u +%Y%m%d-%H%M%S)-$mode
  args+=(--out "$out")
fi

./scripts/deps.sh || echo "bench: warning: installing dependencies failed; using what is installed" >&2

# Kernel limits on message size: raised (as root, when the kernel lets us)
# so that SysV and POSIX message queues can carry 1 MiB messages. These are
# machine-wide settings: each one raised is put back when this script exits,
# however it exits.
restore=()
restore_limits() {
  local r
  for r in "${restore[@]}"; do
    if (echo "${r##*:}" > "/proc/sys/${r%%:*}") 2>/dev/null; then
      echo "bench: restored ${r%%:*} to ${r##*:}"
    else
      echo "bench: warning: could not restore ${r%%:*} to ${r##*:}" >&2
    fi
  done
}
trap restore_limits EXIT
if [ "$(id -u)" = 0 ]; then
  for spec in fs/mqueue/msgsize_max:1048576 kernel/msgmax:1048576 kernel/msgmnb:4194304; do
    f=/proc/sys/${spec%%:*} want=${spec##*:}
    cur=$(cat "$f" 2>/dev/null || echo "")
    if [ -n "$cur" ] && [ "$cur" -lt "$want" ] && (echo "$want" > "$f") 2>/dev/null; then
      restore+=("${spec%%:*}:$cur")
      echo "bench: raised ${spec%%:*} from $cur to $want (restored at exit)"
    fi
  done
fi

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DZIMP_BENCH_ICEORYX2=ON >/dev/null
cmake --build build-bench --target zimp_bench
for t in bench_mpi_openmpi bench_mpi_mpich bench_iceoryx2; do
  cmake --build build-bench --target "$t" >/dev/null 2>&1 ||
    echo "bench: warning: $t could not be built; its rows will say so" >&2
done

echo "bench: load before the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" \
     "(numbers are only comparable on a quiet machine)"
build-bench/bench/zimp_bench "${args[@]}"

py=""
for cand in python3 /usr/bin/python3; do
  if "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
if [ -n "$py" ]; then
  "$py" bench/plot.py "$out"
else
  echo "bench: matplotlib not found; no plots (results are in $out)" >&2
fi
