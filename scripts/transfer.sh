#!/usr/bin/env bash
# The SMP data-transfer study (seed 002) redone with today's mechanisms
# (docs/transfer.md): builds zimp_transfer in Release (build-transfer/), runs
# it, and writes raw CSV, meta.json, table.txt and the plots to
# bench/results/<UTC time>-transfer/. Other arguments go to zimp_transfer
# (--reps R, --quick, --mechs a,b, --copy auto|libc|movsb|nt, --no-tune).
#   ./scripts/transfer.sh              about 3 minutes on 2 cores
#   ./scripts/transfer.sh --quick      one repeat, fewer iterations
# ZIMP_TRANSFER_BUILD=dir builds there instead of build-transfer/. The build
# runs at the lowest priority, the benchmark at the caller's.
set -euo pipefail
cd "$(dirname "$0")/.."

out=bench/results/$(date -u +%Y%m%d-%H%M%S)-transfer
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[i]}" = --out ] && out=${args[i + 1]:-$out}
done
[[ " ${args[*]} " == *" --out "* ]] || args+=(--out "$out")
mkdir -p "$out"

# Message-queue limits: raised as root (where the kernel lets us) so the
# queues can carry chunks up to 2 MiB, the largest chunk Figure 3 tries.
# Machine-wide settings: each one raised is put back when this script exits.
restore=()
restore_limits() {
  local r
  for r in "${restore[@]}"; do
    (echo "${r##*:}" > "/proc/sys/${r%%:*}") 2>/dev/null ||
      echo "transfer: warning: could not restore ${r%%:*} to ${r##*:}" >&2
  done
}
trap restore_limits EXIT
if [ "$(id -u)" = 0 ]; then
  for spec in kernel/msgmax:2097152 kernel/msgmnb:8388608 fs/mqueue/msgsize_max:2097152; do
    f=/proc/sys/${spec%%:*} want=${spec##*:}
    cur=$(cat "$f" 2>/dev/null || echo "")
    if [ -n "$cur" ] && [ "$cur" -lt "$want" ] && (echo "$want" > "$f") 2>/dev/null; then
      restore+=("${spec%%:*}:$cur")
      echo "transfer: raised ${spec%%:*} from $cur to $want (restored at exit)"
    fi
  done
fi

build=${ZIMP_TRANSFER_BUILD:-build-transfer}
nice -n 19 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
nice -n 19 cmake --build "$build" --target zimp_transfer
echo "transfer: load before the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
"$build"/bench/transfer/zimp_transfer "${args[@]}"
echo "transfer: load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

if python3 -c "import matplotlib" 2>/dev/null; then
  python3 bench/transfer/plot.py "$out"
else
  echo "transfer: matplotlib not found; no plots (results are in $out)" >&2
fi
