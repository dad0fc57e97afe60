#!/usr/bin/env bash
# Checks the protocol models with SPIN (model/README.md says what each check is;
# model/lossy.md for lossy.pml).
#
#   model/check.sh            the checks ctest runs (about 3 minutes on 2 cores)
#   ZIMP_MODEL_FULL=1         also the larger configurations (much longer)
#   ZIMP_MODEL_DEFINES=...    extra -D options for the zimp.pml checks
#   ZIMP_MODEL_TRAILS=dir     keep every counterexample there, readable
#   ZIMP_MODEL_JOBS=n         checks run at a time (default: processors)
#
# zimp.pml checks must find no counterexample; zimp-v1.pml checks must find
# theirs (the model keeps proving it can see layout 1's defects). Exit 0 when
# every check came out as expected, 1 otherwise, 77 without spin or a C
# compiler (a skip for ctest).
set -u

here=$(cd "$(dirname "$0")" && pwd)
command -v spin >/dev/null 2>&1 || { echo "check.sh: spin is not installed: skipped"; exit 77; }
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || CC=gcc
command -v "$CC" >/dev/null 2>&1 || { echo "check.sh: no C compiler: skipped"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zimp-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
jobs_max=${ZIMP_MODEL_JOBS:-$(nproc 2>/dev/null || echo 2)}
extra=${ZIMP_MODEL_DEFINES:-}

# name | model | expect (pass: no counterexample; fail: one must be found) | spin defines
checks=(
  # the protocol of docs/protocol.md (model/README.md: what each configuration covers)
  "new/claims|zimp.pml|pass|-DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=1 -DEVICTS=0 -DTIMEOUTS=1"
  "new/evictions|zimp.pml|pass|-DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0"
  "new/joins|zimp.pml|pass|-DNS=2 -DNR=1 -DRJOINS=2 -DMSGS=2 -DCRASHES=0 -DEVICTS=1 -DTIMEOUTS=0"
  "new/receivers|zimp.pml|pass|-DNS=2 -DNR=2 -DRJOINS=1 -DMSGS=1 -DCRASHES=0 -DEVICTS=0 -DTIMEOUTS=0"
  "new/progress|zimp.pml|pass|-DNS=2 -DNR=1 -DMSGS=2 -DCRASHES=1 -DSTOPS=1 -DEVICTS=0 -DTIMEOUTS=0 -DPROGRESS=1"
  "new/v1-eproto|zimp.pml|pass|-DNS=2 -DNR=1 -DMSGS=2 -DREOPENS=1 -DTIMEOUTS=1 -DCRASHES=0 -DEVICTS=0"
  # the refinements of src/core/sender.c (-DIMPL) against the eviction races
  "impl/evictions|zimp.pml|pass|-DIMPL -DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0"
  "impl/joins|zimp.pml|pass|-DIMPL -DNS=2 -DNR=1 -DRJOINS=2 -DMSGS=2 -DCRASHES=0 -DEVICTS=1 -DTIMEOUTS=0"
  # the first draft of layout 2, a quarantine tied to one owner: finding 1 must be found
  "owner/evictions|zimp.pml|fail|-DQUAR_OWNER -DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0"
  # W1-W3 (zimp_unloan) against evictions and joins
  "w/unloan|zimp.pml|pass|-DIMPL -DNS=2 -DNR=1 -DRJOINS=1 -DMSGS=1 -DCRASHES=0 -DEVICTS=1 -DTIMEOUTS=0 -DUNLOANS=1"
  # E2-E3 retried by any sender call, step by step, with a record taken over by a new sender
  # (finding 4): sender.c as it is must show the spurious -ECONNRESET; the fix must not
  "e3/reuse|zimp.pml|fail|-DIMPL -DE3STEPS -DSPARE=1 -DNS=2 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=1 -DCRASHABLE=1 -DEVICTS=1 -DTIMEOUTS=0"
  "e3/reuse-fix|zimp.pml|pass|-DFIX_E3SELF -DIMPL -DE3STEPS -DSPARE=1 -DNS=2 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=1 -DCRASHABLE=1 -DEVICTS=1 -DTIMEOUTS=0"
  # L1's closed words (closed.pml, finding 6): the code's must show the wrong verdict; the fix must not
  "closed/l1|closed.pml|fail|-DNM=2"
  "closed/fix|closed.pml|pass|-DFIX_CLOSED"
  # lossy receivers (lossy.pml, model/lossy.md): the design; without B1 or Z4 it must fail
  "lossy/base|lossy.pml|pass|-DNS=2"
  "lossy/zero-fix|lossy.pml|pass|-DZERO -DFIX_Z"
  "lossy/tailcheck|lossy.pml|pass|-DTAILCHECK"
  "lossy/no-busy|lossy.pml|fail|-DNOBUSY"
  "lossy/zero|lossy.pml|fail|-DZERO"
  # the MPI layer's shared-page barrier (barrier.pml): B1-B4; reading the generation late must fail
  "barrier/three|barrier.pml|pass|-DN=3 -DB=3"
  "barrier/four|barrier.pml|pass|-DN=4 -DB=2"
  "barrier/mismatch|barrier.pml|pass|-DN=3 -DB=2 -DMISMATCH"
  "barrier/late-gen|barrier.pml|fail|-DN=3 -DB=2 -DBUG_LATEGEN"
  # the MPI layer's cooperative rendezvous (coop.pml): C1, C2, C5, C6; dropping the end-of-copy wait or the re-read must fail
  "coop/base|coop.pml|pass|-DNCH=3"
  "coop/failures|coop.pml|pass|-DNCH=4 -DCRASH -DWRITEFAIL"
  "coop/no-wait|coop.pml|fail|-DNCH=3 -DBUG_NOWAIT"
  "coop/no-redo|coop.pml|fail|-DNCH=3 -DWRITEFAIL -DBUG_NOREDO"
  # large messages (hold.pml): who drops a hold on a heap block (H1-H5); scanning before the
  # snapshot or clearing pos without a CAS must fail; heap_loan before the fix of finding 8 must fail
  "hold/join|hold.pml|pass|-DNR0=1 -DJOINERS=1 -DCRASHES=0"
  "hold/crash|hold.pml|pass|-DNR0=1 -DJOINERS=1 -DCRASHES=1 -DCRASHABLE=1 -DREUSE -DNB=1"
  "hold/scanfirst|hold.pml|fail|-DBUG_SCANFIRST -DNR0=0 -DJOINERS=1 -DCRASHES=0"
  "hold/nocas|hold.pml|fail|-DBUG_NOCAS -DNR0=0 -DJOINERS=1 -DCRASHES=0"
  "hold/enomem|hold.pml|fail|-DENOMEM_CHECK -DOUTALLOC -DNR0=1 -DJOINERS=0 -DCRASHES=0"
  "hold/enomem-fix|hold.pml|pass|-DENOMEM_CHECK -DFIX_ENOMEM -DOUTALLOC -DNR0=2 -DJOINERS=0 -DCRASHES=1"
  # one sender's store-load pairings under x86-TSO (fence.pml): F, or membarrier in the receivers;
  # without either, and with the futex value read after the flag (layout 3.3), each must fail
  "fence/f|fence.pml|pass|-DMODE_F"
  "fence/membarrier|fence.pml|pass|-DMODE_MB -DMSGS=4 -DSLOTS=2"
  "fence/adapt|fence.pml|pass|-DMODE_ADAPT -DMSGS=4 -DSLOTS=2"
  "fence/adapt-plain|fence.pml|fail|-DMODE_ADAPT -DBUG_PLAIN_TOGGLE -DJOIN_ONLY"
  "fence/none-wake|fence.pml|fail|-DWAKE_ONLY"
  "fence/none-join|fence.pml|fail|-DJOIN_ONLY"
  "fence/late-v|fence.pml|fail|-DMODE_MB -DBUG_LATE_V"
  # ZIMP_ZERO_ON_RELEASE (zero.pml): Z0-Z3 and Z5 against stops, deaths, evictions and a joiner;
  # the protocol without Z3, with Z0 or Z1 late, with recv_hwm raised late, without evicting the
  # stalled, without Z5 (a message finished while a receiver joins stays unzeroed) or with Z5's
  # range from 0 must fail
  "zero/stop|zero.pml|pass|-DNR0=2 -DSTOPS=1 -DEVICTS=1"
  "zero/crash|zero.pml|pass|-DNR0=2 -DSTOPS=0 -DCRASHES=1 -DEVICTS=1"
  "zero/join|zero.pml|pass|-DNR0=1 -DJOINERS=1 -DSTOPS=1 -DEVICTS=1 -DMSGS=2"
  "zero/complete|zero.pml|pass|-DNR0=2 -DSTOPS=0 -DEVICTS=0 -DCOMPLETE"
  "zero/no-z3|zero.pml|fail|-DBUG_NO_Z3 -DNR0=2 -DSTOPS=1 -DEVICTS=1"
  "zero/z0-late|zero.pml|fail|-DBUG_Z0_LATE -DNR0=2 -DSTOPS=1 -DEVICTS=1"
  "zero/z1-late|zero.pml|fail|-DBUG_Z1_LATE -DNR0=2 -DSTOPS=0 -DEVICTS=0 -DCOMPLETE"
  "zero/hwm-late|zero.pml|fail|-DBUG_HWM_LATE -DNR0=1 -DJOINERS=1 -DSTOPS=0 -DEVICTS=0"
  "zero/no-stall|zero.pml|fail|-DBUG_NO_STALL -DNR0=2 -DSTOPS=1 -DEVICTS=0"
  "zero/join-complete|zero.pml|pass|-DNR0=1 -DJOINERS=1 -DSTOPS=0 -DEVICTS=0 -DCOMPLETE"
  "zero/no-sweep|zero.pml|fail|-DBUG_NO_SWEEP -DNR0=1 -DJOINERS=1 -DSTOPS=0 -DEVICTS=0 -DCOMPLETE"
  "zero/sweep-range|zero.pml|fail|-DBUG_SWEEP_RANGE -DNR0=1 -DJOINERS=1 -DSTOPS=0 -DEVICTS=0"
  # layout 1: each check must find its counterexample
  "v1/eproto|zimp-v1.pml|fail|-DDEFECT=1 -DNS=2 -DMSGS=2 -DREOPENS=2 -DTIMEOUTS=2"
  "v1/lost-loan|zimp-v1.pml|fail|-DDEFECT=2 -DNS=2 -DMSGS0=1 -DMSGS=4 -DREOPENS=1 -DTIMEOUTS=1 -DQUIET0=1"
  "v1/stuck-sender|zimp-v1.pml|fail|-DDEFECT=3 -DNS=2 -DMSGS=2 -DREOPENS=0 -DTIMEOUTS=0 -DSTOPS=1 -DPROGRESS=1"
  "v1/lapped-loan|zimp-v1.pml|fail|-DDEFECT=4 -DNS=2 -DMSGS=3 -DREOPENS=1 -DTIMEOUTS=1 -DRJOINS=0"
)
if [ "${ZIMP_MODEL_FULL:-0}" != 0 ]; then
  checks+=(
    "full/claims|zimp.pml|pass|-DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=1 -DEVICTS=1 -DTIMEOUTS=1"
    "full/evictions|zimp.pml|pass|-DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DMSGS0=2 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0"
    "full/joins|zimp.pml|pass|-DNS=2 -DNR=1 -DRJOINS=2 -DMSGS=2 -DCRASHES=0 -DEVICTS=1 -DTIMEOUTS=1"
    "full/joins-crash|zimp.pml|pass|-DNS=2 -DNR=1 -DRJOINS=2 -DMSGS=2 -DCRASHES=1 -DEVICTS=0 -DTIMEOUTS=0"
    "full/receivers|zimp.pml|pass|-DNS=2 -DNR=2 -DRJOINS=1 -DMSGS=1 -DCRASHES=1 -DCRASHABLE=3 -DEVICTS=0 -DTIMEOUTS=0"
    "full/progress|zimp.pml|pass|-DNS=3 -DNR=1 -DMSGS=1 -DCRASHES=0 -DSTOPS=1 -DEVICTS=0 -DTIMEOUTS=0 -DPROGRESS=1"
    "full/impl-evictions|zimp.pml|pass|-DIMPL -DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DMSGS0=2 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0"
    "full/v1-lost-loan|zimp.pml|pass|-DNS=2 -DNR=1 -DMSGS0=1 -DMSGS=4 -DREOPENS=1 -DTIMEOUTS=1 -DCRASHES=0 -DEVICTS=0"
    "full/unloan-joins|zimp.pml|pass|-DNS=2 -DNR=1 -DRJOINS=2 -DMSGS=2 -DCRASHES=0 -DEVICTS=1 -DTIMEOUTS=0 -DUNLOANS=1"
    "full/unloan-evictions|zimp.pml|pass|-DIMPL -DNS=3 -DNR=1 -DRJOINS=0 -DMSGS=1 -DCRASHES=0 -DEVICTS=2 -DTIMEOUTS=0 -DUNLOANS=1"
    "full/closed-fix|closed.pml|pass|-DNM=3 -DJOINS=2 -DFIX_CLOSED"
    "full/lossy-evict|lossy.pml|pass|-DEVICTS=1"
    "full/lossy-no-lossless|lossy.pml|pass|-DLOSSLESS=0 -DMSGS=3"
    "full/lossy-two|lossy.pml|pass|-DNY=2 -DCRASHES=0"
    "full/barrier-mismatch|barrier.pml|pass|-DN=3 -DB=3 -DMISMATCH"
    "hold/joiner-crash|hold.pml|pass|-DNR0=0 -DJOINERS=1 -DCRASHES=1 -DPASSES=2"
    "hold/four|hold.pml|pass|-DNR0=0 -DJOINERS=1 -DCRASHES=1 -DMSGS=4 -DNB=3"
    "hold/alloc|hold.pml|pass|-DNR0=2 -DJOINERS=0 -DCRASHES=1 -DOUTALLOC"
    "hold/three-droppers|hold.pml|pass|-DNR0=1 -DJOINERS=0 -DCRASHES=0 -DNOUT=2"
    "full/hold-crash|hold.pml|pass|-DNR0=1 -DJOINERS=1 -DCRASHES=1"
    "full/hold-reuse|hold.pml|pass|-DNR0=1 -DJOINERS=1 -DCRASHES=1 -DCRASHABLE=1 -DREUSE"
    "full/hold-four-join|hold.pml|pass|-DNR0=1 -DJOINERS=1 -DCRASHES=0 -DMSGS=4 -DNB=3"
    "full/hold-three-crash|hold.pml|pass|-DNR0=1 -DJOINERS=0 -DCRASHES=1 -DNOUT=2"
    "full/hold-three-join|hold.pml|pass|-DNR0=0 -DJOINERS=1 -DCRASHES=0 -DNOUT=2"
    "full/hold-scan-nojoin|hold.pml|pass|-DBUG_SCANFIRST -DNR0=2 -DJOINERS=0 -DCRASHES=1"
    "full/zero-join|zero.pml|pass|-DNR0=1 -DJOINERS=1 -DSTOPS=1 -DEVICTS=1 -DMSGS=3"
    "full/zero-join-crash|zero.pml|pass|-DNR0=1 -DJOINERS=1 -DSTOPS=0 -DCRASHES=1 -DEVICTS=1 -DMSGS=3"
    "full/hold-enomem-fix|hold.pml|pass|-DENOMEM_CHECK -DFIX_ENOMEM -DOUTALLOC -DNR0=1 -DJOINERS=1 -DCRASHES=1 -DCRASHABLE=1"
  )
fi

# Runs one check in $tmp/<n>; writes one result line to $tmp/<n>/result.
run_check() {
  local n=$1 name=$2 model=$3 expect=$4 defs=$5
  local d="$tmp/$n"
  mkdir -p "$d"
  cp "$here/$model" "$d/"
  [ "$model" = zimp.pml ] && defs="$defs $extra"
  (
    cd "$d" || exit 1
    # shellcheck disable=SC2086
    if ! spin -a $defs "$model" >spin.txt 2>&1; then
      printf 'FAIL  %-22s spin -a failed: %s\n' "$name" "$(head -c 300 spin.txt)" >result
      exit 0
    fi
    if ! "$CC" -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=6144 -o pan pan.c >cc.txt 2>&1; then
      printf 'FAIL  %-22s cc failed: %s\n' "$name" "$(head -c 300 cc.txt)" >result
      exit 0
    fi
    ./pan -m1000000 -w25 -E >pan.txt 2>&1
    local errors states secs depth verdict
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.txt | head -1)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.txt | head -1)
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' pan.txt | head -1)
    depth=$(sed -n 's/.*(at depth \([0-9]*\)).*/\1/p' pan.txt | head -1)
    local what
    what=$(grep -o -m1 'assertion violated.*' pan.txt | cut -c1-100)
    if [ -z "$errors" ]; then
      verdict=FAIL; what="pan did not finish: $(tail -c 300 pan.txt | tr '\n' ' ')"
    elif [ "$expect" = pass ]; then
      if [ "$errors" = 0 ] && ! grep -q -e 'max search depth too small' -e 'MEMLIM' pan.txt; then
        verdict=PASS; what="exhaustive, no counterexample"
      else
        verdict=FAIL; [ "$errors" = 0 ] && what="search incomplete (depth or memory bound)"
      fi
    else
      if [ "$errors" != 0 ]; then
        verdict=PASS; what="counterexample at depth $depth: $what"
      else
        verdict=FAIL; what="no counterexample found (the model no longer sees this defect)"
      fi
    fi
    printf '%-4s  %-22s %12s states %8ss  %s\n' "$verdict" "$name" "${states:-?}" "${secs:-?}" "$what" >result
    if [ -f "$model.trail" ] && [ -n "${ZIMP_MODEL_TRAILS:-}" ]; then
      mkdir -p "$ZIMP_MODEL_TRAILS"
      local base="$ZIMP_MODEL_TRAILS/${name//\//-}"
      cp "$model.trail" "$base.trail"
      # shellcheck disable=SC2086
      spin -t -p -g -l $defs "$model" >"$base.txt" 2>&1
      echo "spin -t -p -g -l $defs $model" >"$base.cmd"
    fi
  )
}

echo "zimp protocol model: spin $(spin -V 2>/dev/null | sed -n 's/^Spin Version \([0-9.]*\).*/\1/p'), ${#checks[@]} checks, $jobs_max at a time"
t0=$(date +%s)
i=0
for c in "${checks[@]}"; do
  IFS='|' read -r name model expect defs <<<"$c"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 0.2; done
  run_check "$i" "$name" "$model" "$expect" "$defs" &
  i=$((i + 1))
done
wait

status=0
for ((j = 0; j < i; j++)); do
  if [ -f "$tmp/$j/result" ]; then
    cat "$tmp/$j/result"
    grep -q '^PASS' "$tmp/$j/result" || status=1
  else
    echo "FAIL  check $j left no result"
    status=1
  fi
done
echo "$( [ $status = 0 ] && echo "all checks as expected" || echo "SOME CHECKS FAILED" ) ($(( $(date +%s) - t0 )) s)"
exit $status
