#!/usr/bin/env bash
# Zeroing evaluation (docs/zerofree.md): installs what it needs, builds the
# preload library and the meter, runs eval/zerofree/run.py, draws the plots.
#   eval/zerofree/run.sh                 full run (about 20-30 min on 2 cores)
#   RUNS=3 APPS=synth eval/zerofree/run.sh   smaller
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
./scripts/deps.sh eval/zerofree/deps.apt
build=$root/build-zerofree-eval
if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
       cmake --build "$build" --target zimp-zerofree zimp-ckpt >/dev/null; }; then
  # the rest of the tree may not build at this moment: build our parts alone
  echo "eval: top-level build failed, building preload/ and tools/ on their own" >&2
  scratch=$build/scratch
  mkdir -p "$scratch"
  cat > "$scratch/CMakeLists.txt" <<CML
cmake_minimum_required(VERSION 3.20)
project(zimp_zerofree_eval C)
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_EXTENSIONS ON)
include(GNUInstallDirs)
add_subdirectory($root/preload preload)
add_subdirectory($root/tools tools)
CML
  cmake -S "$scratch" -B "$build/b" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build/b" --target zimp-zerofree zimp-ckpt >/dev/null
  build=$build/b
fi
lib=$(find "$build" -name libzimp-zerofree.so | head -1)
ckpt=$(find "$build" -name zimp-ckpt -type f | head -1)
cc -O2 -o "$build/synth" eval/zerofree/synth.c -lm
cc -O2 -shared -fPIC -o "$build/perturb0.so" eval/zerofree/perturb0.c
out=eval/zerofree/results
python3 eval/zerofree/run.py --lib "$lib" --ckpt "$ckpt" --synth "$build/synth" \
  --perturb "$build/perturb0.so" --out "$out" --runs "${RUNS:-5}" \
  --apps "${APPS:-synth,lammps,gromacs}" --synth-iters "${SYNTH_ITERS:-40}" \
  --lammps-n "${LAMMPS_N:-10}" --lammps-steps "${LAMMPS_STEPS:-300}" | tee "$out/log.txt"
python3 eval/zerofree/plot.py "$out"
