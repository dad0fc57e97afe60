#!/usr/bin/env bash
# zimp's macro-benchmarks in one command: installs dependencies, builds in
# Release (build-macro/), runs PaxosInside and the snapshot protocol over
# every built-in mechanism (quick mode, or --full), then the failover
# demonstration (zimp, and the same failures on pipes), and writes
# table.txt, macro.csv, macro.json, failover.txt and *.png to
# macro/results/<UTC time>-<mode>/.
#   ./scripts/macro.sh            quick (several minutes on 2 cores)
#   ./scripts/macro.sh --full     full sweep
# Other arguments go to `zimp_macro run` (--mechs a,b  --reps N  --only paxos|snapshot).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=quick
for a in "$@"; do [ "$a" = --full ] && mode=full; done
out=macro/results/$(date -u +%Y%m%d-%H%M%S)-$mode
mkdir -p "$out"

./scripts/deps.sh || echo "macro: warning: installing dependencies failed; using what is installed" >&2
cmake -S . -B build-macro -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-macro --target zimp_macro zimp_failover

{
  echo "macro: $(date -u '+%F %T UTC'), $(nproc) cores, $(uname -r)"
  echo "macro: uptime before the run: $(uptime)"
} | tee "$out/table.txt"
build-macro/macro/zimp_macro run --out "$out" "$@" | tee -a "$out/table.txt"
echo | tee -a "$out/table.txt"
build-macro/macro/zimp_failover all | tee "$out/failover.txt" | tee -a "$out/table.txt"
echo "macro: uptime after the run: $(uptime)" | tee -a "$out/table.txt"

py=""
for cand in python3 /usr/bin/python3; do
  if "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
if [ -n "$py" ]; then
  "$py" macro/plot.py "$out"
else
  echo "macro: matplotlib not found; no plots (results are in $out)" >&2
fi
echo "macro: results in $out"
