#!/usr/bin/env bash
# Builds the libFuzzer target with clang (ASan+UBSan) and runs it for a bounded
# time over the committed corpus. Usage: fuzz/run.sh BUILD_DIR [SECONDS]
# Exit 77 (skip) when clang's libFuzzer is not installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?build dir}; secs=${2:-${ZIMP_FUZZ_SECONDS:-30}}
command -v clang >/dev/null || { echo "clang not installed: skipping"; exit 77; }
mkdir -p "$out/fuzz-corpus"
bin="$out/fuzz_attach"
srcs=("$here/../src/shm/layout.c" "$here"/../src/core/*.c)
if [ ! -x "$bin" ] || [ -n "$(find "$here/fuzz_attach.c" "${srcs[@]}" "$here/../src" -newer "$bin" -print -quit)" ]; then
  clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$here/../include" -I"$here/../src" "$here/fuzz_attach.c" "${srcs[@]}" -lpthread -o "$bin" \
    || { echo "clang cannot build a libFuzzer target here: skipping"; exit 77; }
fi
# New inputs go to the build's corpus; the committed seeds are read, not written.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/fuzz-corpus" "$here/corpus" 2>&1 | grep -E "stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|Done" || true
exit "${PIPESTATUS[0]}"
