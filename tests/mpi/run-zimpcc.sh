#!/bin/sh
# run-zimpcc.sh ZIMPCC ZIMPCXX ZIMPRUN EXAMPLES_DIR: the wrappers as users call them.
#  - -show prints the command (include path, libraries) without running it;
#  - flags pass through: -c, -O2, -ffunction-sections, -Wl,..., -o, -Werror;
#  - C++ sees the header too (zimpcxx);
#  - a call outside the subset fails at link time (no stubs).
zimpcc=$1 zimpcxx=$2 zimprun=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -e
show=$("$zimpcc" -show -O2 x.c -o x)
case $show in *-I*mpi*x.c*-lzimp-mpi*) ;; *) echo "unexpected -show: $show"; exit 1 ;; esac
case $("$zimpcc" -show -c x.c) in *-lzimp-mpi*) echo "-c must not link"; exit 1 ;; esac
"$zimpcc" -O2 -Wall -Wextra -Werror -ffunction-sections -c "$src/hello.c" -o "$tmp/hello.o"
"$zimpcc" "$tmp/hello.o" -Wl,--gc-sections -Wl,-O1 -o "$tmp/hello"
"$zimpcc" -O2 -Wall -Werror "$src/ring.c" -o "$tmp/ring"
"$zimpcc" -O2 "$src/pi.c" -o "$tmp/pi" -lm
"$zimpcxx" -x c++ -O2 -Wall -Werror "$src/ring.c" -o "$tmp/ring++"
out=$("$zimprun" -n 3 "$tmp/hello")
[ "$(echo "$out" | grep -c 'token 42')" = 3 ] || { echo "hello: $out"; exit 1; }
"$zimprun" -n 4 "$tmp/ring" | grep -q "visited 4 ranks, allreduce ok"
"$zimprun" -n 3 "$tmp/ring++" | grep -q "visited 3 ranks, allreduce ok"
"$zimprun" -n 2 "$tmp/pi" | grep -q "(ok)"
cat > "$tmp/win.c" <<'C'
#include <mpi.h>
int MPI_Win_fence(int assert, int win);
int main(void) { return MPI_Win_fence(0, 0); }
C
if "$zimpcc" "$tmp/win.c" -o "$tmp/win" 2>/dev/null; then
    echo "a program calling MPI_Win_fence linked: there must be no such symbol"
    exit 1
fi
echo "zimpcc/zimpcxx: flags pass through, examples run, unknown calls fail to link"
