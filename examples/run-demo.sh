#!/bin/sh
# Runs the README's example and checks it: three subscribers each print the
# three messages in order. Also checks the README still shows this very file.
# Usage: run-demo.sh DEMO_BINARY SOURCE_DIR
set -eu
demo=$1 src=$2
readme_code=$(awk '/^## A publisher and three subscribers/{f=1} f&&/^```c/{g=1; next} g&&/^```/{exit} g' "$src/README.md")
if [ "$readme_code" != "$(cat "$src/examples/demo.c")" ]; then
  echo "README.md's example differs from examples/demo.c" >&2
  exit 1
fi
out=$("$demo")
for k in 0 1 2; do
  got=$(printf '%s\n' "$out" | sed -n "s/^subscriber $k: //p" | tr '\n' ',')
  if [ "$got" != "message 0,message 1,message 2," ]; then
    echo "subscriber $k printed '$got'" >&2
    exit 1
  fi
done
[ ! -e /dev/shm/zimp.demo ] || { echo "channel left behind" >&2; exit 1; }
echo "demo: 3 subscribers x 3 messages, in order"
