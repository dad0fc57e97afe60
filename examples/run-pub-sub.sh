#!/bin/sh
# Runs sub and pub together and checks what sub printed.  Usage: run-pub-sub.sh PUB SUB
set -eu
pub=$1 sub=$2 name=zimp-example-$$
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$sub" "$name" >"$out" &
spid=$!
i=0
until grep -q '^ready$' "$out"; do
  i=$((i + 1))
  if [ $i -gt 1000 ]; then echo "sub did not start"; kill $spid; exit 1; fi
  sleep 0.01
done
"$pub" "$name" 5
wait $spid
printf 'ready\nhello 0\nhello 1\nhello 2\nhello 3\nhello 4\n' | diff - "$out"
if [ -e "/dev/shm/zimp.$name" ]; then echo "channel not removed"; exit 1; fi
echo "pub/sub example ok"
