#!/usr/bin/env bash
# The zimp command on live, dead-member and leaked channels and heaps:
# output, --json (parsed and checked for its fields), exit codes.
#   test_cli.sh ZIMP_BINARY LIBZIMP_SO
set -u
zimp=$1 lib=$2
n=cli$$
fails=0
check() {   # check DESCRIPTION COMMAND...: the command must succeed
  if ! "${@:2}"; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
status_is() {   # status_is WANT COMMAND...
  local want=$1; shift
  "$@" >/dev/null 2>&1; local got=$?
  [ "$got" -eq "$want" ] || { echo "FAIL: '$*' exited $got, want $want"; fails=$((fails + 1)); }
}
json() {   # json PYTHON-EXPR < json: the expression over d must be true
  python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"
}
wait_for() {   # wait_for SECONDS COMMAND...: until the command succeeds
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.05; done
}
cleanup() { kill -9 $(jobs -p) 2>/dev/null; rm -f /dev/shm/zimp.$n-* /dev/shm/zimpheap.$n-*; }
trap cleanup EXIT

# usage and errors
status_is 0 "$zimp" --help
status_is 0 "$zimp" help gc
status_is 2 "$zimp"
status_is 2 "$zimp" bogus
status_is 2 "$zimp" stat
status_is 2 "$zimp" ls --bogus
status_is 2 "$zimp" stat x --watch -1
status_is 1 "$zimp" stat $n-nosuch
status_is 1 "$zimp" rm $n-nosuch
status_is 1 "$zimp" gc $n-nosuch
status_is 2 "$zimp" sub $n-x --timeout
out=$("$zimp" sub $n-x --timeout 2>&1); [[ $out == *"needs a value"* ]] || { echo "FAIL: missing value message: $out"; fails=$((fails+1)); }
status_is 1 "$zimp" pub 'bad/name' </dev/null
out=$("$zimp" stat $n-nosuch 2>&1); [[ $out == *"no channel or heap"* ]] || { echo "FAIL: stat message: $out"; fails=$((fails+1)); }
"$zimp" --version | grep -q '^zimp [0-9]' || { echo "FAIL: --version"; fails=$((fails+1)); }
man=$("$zimp" --man)
for c in ls stat rm gc pub sub; do
  grep -q "^\.B zimp $c" <<<"$man" || { echo "FAIL: man page lacks $c"; fails=$((fails+1)); }
done
[[ $man == .TH* ]] || { echo "FAIL: man page header"; fails=$((fails+1)); }

# a live channel: sub prints what pub sends
"$zimp" sub $n-live --create --count 3 --timeout 20 > /tmp/$n.out &
sub=$!
check "a receiver shows in stat" wait_for 10 sh -c "'$zimp' stat $n-live --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(m[\"role\"]==\"receiver\" and m[\"state\"]==\"live\" for m in d[\"members\"]) else 1)'"
printf 'one\ntwo\nthree four\n' | "$zimp" pub $n-live || { echo "FAIL: pub"; fails=$((fails+1)); }
wait $sub || { echo "FAIL: sub exited $?"; fails=$((fails+1)); }
[ "$(cat /tmp/$n.out)" = "$(printf 'one\ntwo\nthree four')" ] || { echo "FAIL: sub printed: $(cat /tmp/$n.out)"; fails=$((fails+1)); }
rm -f /tmp/$n.out
"$zimp" ls --json | json "any(s['name']=='$n-live' and s['kind']=='channel' and s['published']==3 and s['state']=='unused' for s in d['segments']) and d['shm']['size']>0" \
  || { echo "FAIL: ls --json after pub/sub"; fails=$((fails+1)); }
"$zimp" ls | grep -q "$n-live" || { echo "FAIL: ls table"; fails=$((fails+1)); }
# --watch: N refreshes, a rate from the second on
w=$("$zimp" stat $n-live --json --watch 0.05 --count 2)
[ "$(grep -c '"rate"' <<<"$w")" -eq 2 ] && grep -q '"rate": null' <<<"$w" && grep -q '"rate": 0.0' <<<"$w" \
  || { echo "FAIL: stat --watch: $w"; fails=$((fails+1)); }

# a member killed: stat says dead, gc removes the channel, ls no longer shows it
"$zimp" sub $n-dead --create --timeout 30 >/dev/null &
dead=$!
check "receiver of $n-dead" wait_for 10 sh -c "'$zimp' stat $n-dead | grep -q live"
# a live one keeps its channel
"$zimp" sub $n-busy --create --timeout 30 >/dev/null &
busy=$!
check "receiver of $n-busy" wait_for 10 sh -c "'$zimp' stat $n-busy | grep -q live"
kill -9 $dead; wait $dead 2>/dev/null
"$zimp" stat $n-dead --json | json "[m['state'] for m in d['members']]==['dead']" || { echo "FAIL: dead member"; fails=$((fails+1)); }
"$zimp" gc --dry-run --json $n-dead $n-busy | json "[s['name'] for s in d['removed']]==['$n-dead'] and d['dry_run']" \
  || { echo "FAIL: gc --dry-run"; fails=$((fails+1)); }
[ -e /dev/shm/zimp.$n-dead ] || { echo "FAIL: --dry-run removed"; fails=$((fails+1)); }
"$zimp" gc $n-dead $n-busy | grep -q "removed channel $n-dead" || { echo "FAIL: gc"; fails=$((fails+1)); }
[ ! -e /dev/shm/zimp.$n-dead ] || { echo "FAIL: gc left $n-dead"; fails=$((fails+1)); }
[ -e /dev/shm/zimp.$n-busy ] || { echo "FAIL: gc removed a channel in use"; fails=$((fails+1)); }
kill $busy; wait $busy 2>/dev/null

# a leaked heap (its creator exited, nobody attached), and rm. Python cannot
# load a sanitizer build's library: that part runs in the normal build only.
if [ -n "${ZIMP_SANITIZER:-}" ]; then
  echo "skip: heap part (python cannot load a $ZIMP_SANITIZER build of libzimp)"
else
python3 - "$lib" "$n-heap" <<'PY' || { echo "FAIL: heap create"; fails=$((fails+1)); }
import ctypes, sys
l = ctypes.CDLL(sys.argv[1])
sys.exit(l.zimp_heap_create(sys.argv[2].encode(), None) != 0)
PY
"$zimp" stat $n-heap --json | json "d['kind']=='heap' and d['members']==0 and d['used']==0" || { echo "FAIL: heap stat"; fails=$((fails+1)); }
"$zimp" ls --json | json "any(s['name']=='$n-heap' and s['kind']=='heap' and s['state']=='unused' for s in d['segments'])" \
  || { echo "FAIL: heap in ls"; fails=$((fails+1)); }
"$zimp" gc --json $n-heap | json "d['removed']==[{'kind':'heap','name':'$n-heap'}]" || { echo "FAIL: heap gc"; fails=$((fails+1)); }
fi
"$zimp" sub $n-rm --create --count 1 --timeout 0.2 >/dev/null 2>&1
status_is 0 "$zimp" rm $n-rm
[ ! -e /dev/shm/zimp.$n-rm ] || { echo "FAIL: rm"; fails=$((fails+1)); }
# sub --timeout without a sender: exit 1 with a message (0: do not wait at all)
for t in 0.2 0; do
  out=$("$zimp" sub $n-quiet --create --timeout $t 2>&1); st=$?
  [ $st -eq 1 ] && [[ $out == *"no message"* ]] || { echo "FAIL: sub timeout $t: $st $out"; fails=$((fails+1)); }
done
"$zimp" rm $n-quiet

[ $fails -eq 0 ] && echo "ok" || { echo "$fails failure(s)"; exit 1; }
