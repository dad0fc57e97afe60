#!/bin/bash
# paired A/B: new (build-bench) vs old (/tmp/exp, f8a2709), small sizes, both levels
cd /work/main
for round in 1 2; do
  for lvl in app transfer; do
    extra=""; [ $lvl = transfer ] && extra="--transfer-only"
    for v in new old; do
      if [ $v = new ]; then B=build-bench/bench/zimp_bench; else B=/tmp/exp/build/bench/zimp_bench; fi
      echo "== round $round $lvl $v $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
      $B --no-compare --no-external --nrecv 1,4 --sizes 1,64,128 --mechs zimp,bmp,ring --repeat 7 --seconds 0.2 $extra --out /tmp/exp/ab-$round-$lvl-$v 2>&1 | grep -E "^N =|zimp zero|Barrel|SPSC" | grep -v "  64B  "
    done
  done
done
