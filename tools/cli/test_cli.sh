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
tmp=$(mktemp -d)
cleanup() {
  kill -9 $(jobs -p) 2>/dev/null
  rmdir /dev/shm/zimp.$n-dir 2>/dev/null
  rm -rf /dev/shm/zimp.$n-* /dev/shm/zimpheap.$n-* "$tmp"
}
trap cleanup EXIT

# usage and errors
status_is 0 "$zimp" --help
status_is 0 "$zimp" help gc
status_is 2 "$zimp"
status_is 2 "$zimp" bogus
status_is 2 "$zimp" stat
status_is 2 "$zimp" ls --bogus
status_is 2 "$zimp" stat x --watch -1
# numbers: not finite, empty, negative, out of range or overflowing is a usage error
for v in nan inf -nan 1e300 '' 0 604801 0x10 ' 1'; do status_is 2 "$zimp" stat $n-nosuch --watch "$v"; done
for v in '' -1 1.5 99999999999999999999999; do status_is 2 "$zimp" sub $n-nosuch --count "$v"; done
for v in '' -1 nan inf 1e300; do status_is 2 timeout 10 "$zimp" sub $n-nosuch --timeout "$v"; done
out=$("$zimp" stat x --watch nan 2>&1); [[ $out == *"0.01 to 604800 seconds"* ]] || { echo "FAIL: --watch range message: $out"; fails=$((fails+1)); }
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
# ... as JSON Lines: one document per refresh, each on one line
python3 -c 'import json,sys; l=sys.stdin.read().splitlines(); sys.exit(0 if len(l)==2 and all(json.loads(x)["kind"]=="channel" for x in l) else 1)' <<<"$w" \
  || { echo "FAIL: stat --watch --json is not JSON Lines: $w"; fails=$((fails+1)); }
# a channel removed and made again during --watch: its rate starts over (no wrapped difference)
"$zimp" sub $n-again --create --timeout 0 >/dev/null 2>&1
printf '1\n2\n3\n4\n5\n' | "$zimp" pub $n-again
"$zimp" stat $n-again --json --watch 1 --count 3 > "$tmp/again" &
watch=$!
check "first refresh of $n-again" wait_for 10 grep -q rate "$tmp/again"
"$zimp" rm $n-again && "$zimp" sub $n-again --create --timeout 0 >/dev/null 2>&1
echo x | "$zimp" pub $n-again
wait $watch || { echo "FAIL: stat --watch of a channel made again exited $?"; fails=$((fails+1)); }
python3 -c 'import json,sys; r=[json.loads(x)["rate"] for x in sys.stdin]; sys.exit(0 if len(r)==3 and r[1] is None and all(x is None or 0<=x<1e6 for x in r) else 1)' < "$tmp/again" \
  || { echo "FAIL: rate of a channel made again: $(cat "$tmp/again")"; fails=$((fails+1)); }
"$zimp" rm $n-again

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

# what others may leave in /dev/shm under zimp's prefixes: names that need
# escaping in JSON, a symbolic link, a directory, a FIFO, a damaged heap
: > "/dev/shm/zimp.$n-q\"x\\y"
: > "/dev/shm/zimp.$n-"$'\xff\xfe\x01'
ln -s /etc/passwd /dev/shm/zimp.$n-link
mkdir /dev/shm/zimp.$n-dir
mkfifo /dev/shm/zimp.$n-fifo
: > /dev/shm/zimpheap.$n-badheap
status_is 0 timeout 10 "$zimp" ls
# text output: a name with a terminal escape and a newline is printed escaped, on one line
: > "/dev/shm/zimp.$n-"$'esc\x1b[31m\nforged'
out=$(timeout 10 "$zimp" ls 2>&1)
[[ $out != *$'\x1b'* ]] && [[ $out == *"$n-esc\\x1b[31m\\x0aforged"* ]] && ! grep -q '^forged' <<<"$out" \
  || { echo "FAIL: ls text output of a name with control bytes: $(grep -a esc <<<"$out" | cat -A)"; fails=$((fails+1)); }
rm -f "/dev/shm/zimp.$n-"$'esc\x1b[31m\nforged'
timeout 10 "$zimp" ls --json | python3 -c '
import json, sys
n = sys.argv[1]
s = {x["name"]: x for x in json.load(sys.stdin)["segments"]}
ok = n + "-q\"x\\y" in s and n + "-\xff\xfe\x01" in s
link = s.get(n + "-link", {})
ok = ok and link.get("bytes", 0) is None and "symbolic link" in link.get("error", "")
ok = ok and "directory" in s.get(n + "-dir", {}).get("error", "") and "FIFO" in s.get(n + "-fifo", {}).get("error", "")
ok = ok and "heap segment" in s.get(n + "-badheap", {}).get("error", "")
sys.exit(0 if ok else 1)' $n || { echo "FAIL: ls --json with odd files: $(timeout 10 "$zimp" ls --json 2>&1 | grep -a $n)"; fails=$((fails+1)); }
out=$("$zimp" stat $n-badheap 2>&1); [[ $out == *"heap segment failed validation"* ]] || { echo "FAIL: heap message: $out"; fails=$((fails+1)); }
out=$(timeout 10 "$zimp" stat $n-link 2>&1); [[ $out == *"symbolic link, not a segment"* ]] || { echo "FAIL: symlink message: $out"; fails=$((fails+1)); }
# gc leaves what is not a regular file, or has no zimp name, and says so the same with --dry-run or without
odd=($n-dir $n-fifo $n-link "$n-q\"x\\y")
for dry in --dry-run ''; do
  timeout 10 "$zimp" gc $dry --json "${odd[@]}" | json "d['removed']==[] and sorted(s['name'] for s in d['skipped'])==sorted(['$n-dir','$n-fifo','$n-link','$n-q\"x\\\\y'])" \
    || { echo "FAIL: gc $dry --json of odd files"; fails=$((fails+1)); }
  out=$(timeout 10 "$zimp" gc $dry $n-dir 2>&1); st=$?
  [ $st -eq 0 ] && [[ $out == "skipped channel $n-dir: a directory, not a segment" ]] || { echo "FAIL: gc $dry of a directory: $st $out"; fails=$((fails+1)); }
done
[ -e /dev/shm/zimp.$n-fifo ] || { echo "FAIL: gc removed a FIFO"; fails=$((fails+1)); }
# rm removes whatever it is by its exact name, except a directory or what is not a name
status_is 0 timeout 10 "$zimp" rm $n-fifo "$n-q\"x\\y" "$n-"$'\xff\xfe\x01' $n-link $n-badheap
for f in $n-fifo "$n-q\"x\\y" "$n-"$'\xff\xfe\x01' $n-link; do
  [ ! -e "/dev/shm/zimp.$f" ] && [ ! -L "/dev/shm/zimp.$f" ] || { echo "FAIL: rm left $f"; fails=$((fails+1)); }
done
[ -e /etc/passwd ] && [ ! -e /dev/shm/zimpheap.$n-badheap ] || { echo "FAIL: rm of a link or a heap"; fails=$((fails+1)); }
status_is 1 "$zimp" rm $n-dir
[ -d /dev/shm/zimp.$n-dir ] || { echo "FAIL: rm removed a directory"; fails=$((fails+1)); }
for bad in '' . .. $n/x; do status_is 1 "$zimp" rm "$bad"; done

# trace: a --out with a ',' (ZIMP_TRACE's separator) is refused; messages name the trace's problem
for d in rec,x rec,otf2=0; do
  (cd "$tmp" && "$zimp" trace record --out $d -- true >/dev/null 2>&1); st=$?
  [ $st -eq 2 ] && [ ! -e "$tmp/$d" ] || { echo "FAIL: trace record --out $d: $st"; fails=$((fails+1)); }
done
out=$("$zimp" trace show "$tmp/nosuch" 2>&1); [[ $out == *"No such file or directory"* && $out != *channel* ]] || { echo "FAIL: trace show message: $out"; fails=$((fails+1)); }
out=$("$zimp" trace merge "$tmp" --out "$tmp" 2>&1); [[ $out == *"$tmp exists (merge writes a new directory"* ]] || { echo "FAIL: trace merge message: $out"; fails=$((fails+1)); }

[ $fails -eq 0 ] && echo "ok" || { echo "$fails failure(s)"; exit 1; }
