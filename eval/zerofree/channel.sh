#!/usr/bin/env bash
# Checkpoint size of a zimp channel after traffic, with and without
# ZIMP_ZERO_ON_RELEASE, as zimp-ckpt measures it (only the shared mappings).
#   eval/zerofree/channel.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/deps.sh
cmake -S . -B build-eval -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-eval --target zimp_static zimp-ckpt >/dev/null
cc -O2 -Iinclude eval/zerofree/channel_ckpt.c build-eval/src/libzimp.a -lpthread -o build-eval/channel_ckpt
for mode in plain zero; do
  coproc build-eval/channel_ckpt "$mode"
  read -r pid <&"${COPROC[0]}"
  echo "== channel of 256 x 4 KiB slots after 256 messages of 4000 random bytes: $mode"
  build-eval/tools/ckpt/zimp-ckpt --only shared --codecs zstd-3,lz4-1 "$pid"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
