#!/usr/bin/env bash
# zimp trace record/show/export/merge, zimp ckpt and zimp bench, and (when a
# session daemon can run here) an LTTng session recording zimp's tracepoints.
#   test_trace_cli.sh ZIMP_BINARY
set -u
zimp=$1
tmp=$(mktemp -d /tmp/zimp-trace-cli-XXXXXX)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
status_is() {   # status_is WANT COMMAND...
  local want=$1; shift
  "$@" >/dev/null 2>"$tmp/err"; local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, want $want: $(cat "$tmp/err")"
}
cleanup() {
  [ -n "${started:-}" ] && [ -s "$tmp/sessiond.pid" ] && kill "$(cat "$tmp/sessiond.pid")" 2>/dev/null
  rm -rf "$tmp"; rm -f /dev/shm/zimp.tcli$$-*
}
trap cleanup EXIT
ch=tcli$$-a

# usage and errors
status_is 2 "$zimp" trace
status_is 2 "$zimp" trace bogus x
status_is 2 "$zimp" trace record
status_is 2 "$zimp" trace record --level loud -- true
status_is 2 "$zimp" trace show
status_is 2 "$zimp" trace merge "$tmp"
status_is 1 "$zimp" trace show "$tmp/nosuch"
"$zimp" help trace | grep -q "record" || fail "help trace"
"$zimp" --man | grep -q "zimp trace" || fail "man page lacks trace"

if ! "$zimp" trace show "$tmp" 2>&1 | grep -q "without OTF2"; then
  # a traced run of the CLI's own pub and sub
  out=$("$zimp" trace record --out "$tmp/rec" --level debug -- sh -c \
    "'$zimp' sub $ch --create --count 2 > '$tmp/sub.out' & sleep 1; printf 'hi\nyo\n' | '$zimp' pub $ch; wait" 2>&1)
  [ $? -eq 0 ] || fail "trace record: $out"
  [[ $out == *"events in $tmp/rec"* ]] || fail "record summary: $out"
  [ "$(cat "$tmp/sub.out")" = "$(printf 'hi\nyo')" ] || fail "sub under trace got: $(cat "$tmp/sub.out")"
  "$zimp" trace show "$tmp/rec" > "$tmp/show" || fail "trace show"
  grep -q "send .*channel=$ch .*bytes=6869" "$tmp/show" || fail "show lacks the send of 'hi': $(head -20 "$tmp/show")"
  grep -q "recv .*channel=$ch .*bytes=796f" "$tmp/show" || fail "show lacks the recv of 'yo'"
  grep -q "open .*channel=$ch" "$tmp/show" || fail "show lacks open"
  "$zimp" trace export "$tmp/rec" --out "$tmp/rec.json" || fail "trace export"
  python3 - "$tmp/rec.json" <<'PY' || fail "exported JSON"
import json, sys
d = json.load(open(sys.argv[1]))
names = {e["name"] for e in d["traceEvents"]}
assert {"send", "recv", "open", "close", "create", "process_name"} <= names, names
pids = {e["pid"] for e in d["traceEvents"] if e["name"] == "send"}
assert len(pids) == 1, pids
PY
  "$zimp" trace export "$tmp/rec" | python3 -c "import json,sys; json.load(sys.stdin)" || fail "export to stdout"
  status_is 0 "$zimp" trace merge "$tmp/rec" --out "$tmp/merged"
  otf2-print "$tmp/merged/traces.otf2" > "$tmp/merged.txt" 2>"$tmp/merged.err" || fail "otf2-print merged"
  [ -s "$tmp/merged.err" ] && fail "otf2-print complained: $(cat "$tmp/merged.err")"
  [ "$(grep -c '^ENTER .*Region: "send"' "$tmp/merged.txt")" -eq 2 ] || fail "merged archive: 2 sends"
  status_is 1 "$zimp" trace record --out "$tmp/rec" -- true           # exists
  # a recorded command killed by a signal: its status, and what it flushed
  status_is 137 "$zimp" trace record --out "$tmp/killed" -- sh -c 'kill -9 $$'
  # the PNG renderer, when matplotlib is there
  png=$(dirname "$0")/../../scripts/trace_png.py
  if python3 -c "import matplotlib" 2>/dev/null; then
    python3 "$png" "$tmp/rec.json" "$tmp/rec.png" || fail "trace_png.py"
    [ "$(head -c 4 "$tmp/rec.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "not a PNG"
  fi
else
  echo "skip: OTF2 left out of this build"
fi

# ckpt and bench pass their arguments to the tools beside zimp
if [ -x "$(dirname "$zimp")/../ckpt/zimp-ckpt" ]; then
  "$zimp" ckpt --help | grep -q "usage: zimp-ckpt" || fail "zimp ckpt --help"
  status_is 2 "$zimp" ckpt                     # zimp-ckpt's own usage status comes back
fi
if [ -x "$(dirname "$zimp")/../../bench/zimp_bench" ]; then
  "$zimp" bench --list | grep -q "zimp" || fail "zimp bench --list"
fi

# LTTng: a session records zimp's tracepoints (needs lttng-sessiond, which runs here as any user)
lib=$(ldd "$zimp" | awk '/libzimp\.so/ {print $3}')
started=""
if command -v lttng >/dev/null && command -v babeltrace2 >/dev/null && [ -n "$lib" ] &&
   [ -e "$(dirname "$lib")/libzimp-lttng.so.0" ] && { lttng list >/dev/null 2>&1 ||
   { lttng-sessiond --daemonize --no-kernel --pidfile="$tmp/sessiond.pid" >/dev/null 2>&1 && started=1; }; }; then
  s=zimp-test-$$
  if lttng create $s --output="$tmp/lttng" >/dev/null && lttng enable-event -u 'zimp:*' -s $s >/dev/null &&
     lttng start $s >/dev/null; then
    ZIMP_TRACE=debug,lttng=1,otf2=0 sh -c "'$zimp' sub $ch-l --create --count 1 > /dev/null & sleep 1; echo lt | '$zimp' pub $ch-l; wait"
    lttng stop $s >/dev/null; lttng destroy $s >/dev/null
    babeltrace2 "$tmp/lttng" > "$tmp/lttng.txt" 2>&1 || fail "babeltrace2: $(tail -3 "$tmp/lttng.txt")"
    for e in open send recv close; do
      grep -q "zimp:$e:" "$tmp/lttng.txt" || fail "the LTTng session has no zimp:$e"
    done
  else
    fail "lttng session"
  fi
else
  echo "skip: no LTTng session daemon here"
fi

[ $fails -eq 0 ] && echo "trace_cli: all passed"
exit $((fails > 0))
