#!/usr/bin/env bash
# The whole test suite: installs dependencies, then builds and runs every test
# three times: a normal build, ASan+UBSan, and TSan. Exit status 0 = all passed.
#   ./scripts/test.sh            everything
#   ZIMP_TEST_BUILDS=normal ./scripts/test.sh   only the normal build
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
builds=${ZIMP_TEST_BUILDS:-"normal address thread"}
jobs=$(nproc)
status=0
for b in $builds; do
  dir=build-test-$b
  san=""; [ "$b" = normal ] || san=$b
  echo "=== $b build ==="
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZIMP_SANITIZE="$san" -DZIMP_WERROR=ON >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
  if ! ZIMP_SANITIZER="$san" ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600; then
    status=1
  fi
done
exit $status
