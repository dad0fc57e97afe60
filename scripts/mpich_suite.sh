#!/usr/bin/env bash
# MPICH's own test suite (test/mpi of Debian's mpich source package) against
# zimp's MPI layer, and optionally against Open MPI and MPICH themselves.
#
# Fetches the source package by name with apt-get (a private deb-src list,
# nothing in /etc/apt is changed), unpacks test/mpi only, configures it once
# per implementation (its mpitestconf.h), builds the MTest helpers and every
# chosen program with that implementation's compiler wrapper, and runs each
# testlist entry with the number of ranks the testlist gives. A run passes
# when it exits with status 0 and prints a line "No Errors" or "No errors"
# (MPICH's own rule: runtests matches /^\s*No [Ee]rrors\s*$/),
# within --timeout seconds (default 60) or the entry's timeLimit if longer.
#
# The chosen entries: every line of the testlists of the groups (default
# pt2pt coll attr comm datatype) with at most --max-np ranks, except programs
# that need MPICH's dtpools library and programs that call MPI-4 functions
# (large-count _c calls, persistent collectives, MPI_Isendrecv, ...): the
# suite is run as an MPI 3.1 suite. --list prints the entries and exits.
#
#   ./scripts/mpich_suite.sh [--impl zimp,openmpi,mpich] [--groups "pt2pt coll"]
#       [--max-np 4] [--timeout S] [--work DIR] [--build-dir DIR] [--only REGEX]
#       [--list]
# --work: where the source and builds go (default /tmp/zimp-mpich-suite;
#         never inside the repository). --build-dir: this tree's build with
#         zimpcc/zimprun (default build). Prints per-run verdicts, the failures'
#         last lines to <work>/logs/, and "impl: P passed of N runs" per impl.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

impls="zimp" groups="pt2pt coll attr comm datatype" max_np=4 limit=60
work=/tmp/zimp-mpich-suite bdir=$root/build only="" list=no
while [ $# -gt 0 ]; do
  case $1 in
    --impl) impls=${2//,/ }; shift ;;
    --groups) groups=$2; shift ;;
    --max-np) max_np=$2; shift ;;
    --timeout) limit=$2; shift ;;
    --work) work=$2; shift ;;
    --build-dir) bdir=$(cd "$2" && pwd); shift ;;
    --only) only=$2; shift ;;
    --list) list=yes ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "mpich_suite: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$work"
work=$(cd "$work" && pwd)
case $work/ in "$root"/*) echo "mpich_suite: --work must be outside the repository" >&2; exit 2 ;; esac

# ---- fetch: apt-get source --download-only mpich, with a private deb-src list ----
src=$(ls -d "$work"/mpich-*/test/mpi 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
  . /etc/os-release
  apt=$work/apt
  mkdir -p "$apt/lists/partial" "$apt/parts" "$apt/cache/archives/partial" "$work/dl"
  echo "deb-src http://deb.debian.org/debian ${VERSION_CODENAME:-bookworm} main" > "$apt/sources.list"
  aopt=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/parts"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=root")
  echo "mpich_suite: fetching Debian's mpich source package" >&2
  apt-get "${aopt[@]}" update >/dev/null
  (cd "$work/dl" && apt-get "${aopt[@]}" source --download-only mpich >/dev/null)
  tarball=$(ls "$work"/dl/mpich_*.orig.tar.* | head -1)
  tar -C "$work" -xf "$tarball" --wildcards '*/test/mpi/*'
  src=$(ls -d "$work"/mpich-*/test/mpi | head -1)
fi

# ---- the entries: "group prog np args..." ----
entries=$(mktemp "$work/entries.XXXXXX")   # one per invocation: runs may overlap
trap 'rm -f "$entries"' EXIT
mpi4='MPI_[A-Za-z_]*_c[[:space:]]*\(|MPI_[A-Z][a-z]*(_[a-z]+)*_init[[:space:]]*\(|MPI_Isendrecv|MPI_Intercomm_create_from_groups|MPI_Comm_idup_with_info|MPI_Comm_dup_with_info|MPI_Info_create_env|MPI_Session|MPIX_|MPI_Pready|MPI_Psend_init|MPI_Precv_init|MPI_Comm_get_info|MPI_Comm_set_info'
for g in $groups; do
  [ -f "$src/$g/testlist.in" ] || continue
  while read -r prog np rest; do
    case $prog in ''|'#'*|@*) continue ;; esac
    [ "$np" -le "$max_np" ] 2>/dev/null || continue
    [ -f "$src/$g/$prog.c" ] || continue
    grep -q 'mtest_dtp.h\|dtpools.h' "$src/$g/$prog.c" && continue
    grep -Eq "$mpi4" "$src/$g/$prog.c" && continue
    if [ -n "$only" ] && ! echo "$g/$prog" | grep -Eq "$only"; then continue; fi
    echo "$g $prog $np $rest" >> "$entries"
  done < "$src/$g/testlist.in"
done
if [ "$list" = yes ]; then cat "$entries"; exit 0; fi

# ---- build and run per implementation ----
summary=""
for impl in $impls; do
  case $impl in
    zimp) cc=$bdir/tools/mpi/zimpcc; run=("$bdir/tools/mpi/zimprun" -n) ;;
    openmpi) cc=$(command -v mpicc.openmpi || true)
             run=(mpirun.openmpi --oversubscribe --bind-to none -np)
             [ "$(id -u)" = 0 ] && run=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np) ;;
    mpich) cc=$(command -v mpicc.mpich || true); run=(mpiexec.mpich -n) ;;
    *) echo "mpich_suite: unknown implementation $impl" >&2; exit 2 ;;
  esac
  if [ -z "$cc" ] || [ ! -x "$cc" ]; then
    echo "mpich_suite: $impl: no compiler wrapper, skipped" >&2
    continue
  fi
  b=$work/build-$impl
  mkdir -p "$b" "$work/logs/$impl"
  if [ ! -f "$b/include/mpitestconf.h" ]; then
    echo "mpich_suite: $impl: configuring the suite" >&2
    (cd "$b" && "$src/configure" CC="$cc" MPICC="$cc" --disable-fortran --disable-cxx --disable-romio \
        --disable-spawn --disable-rma --disable-dtpools --disable-checkerrors --disable-threads \
        > configure.log 2>&1) || { echo "mpich_suite: $impl: configure failed ($b/configure.log)" >&2; continue; }
  fi
  inc=(-I"$b/include" -I"$src/include")
  for u in mtest mtest_common mtest_single dtypes; do
    [ -f "$b/$u.o" ] || "$cc" -O1 -w "${inc[@]}" -c "$src/util/$u.c" -o "$b/$u.o" 2>"$b/$u.log" || true
  done
  # dtypes.c (MTestDatatype2*, for sendrecvt2/4) as an archive: linked only where used
  [ -f "$b/libmtestdt.a" ] || ar rcs "$b/libmtestdt.a" "$b/dtypes.o" 2>/dev/null || true
  dtlib=()
  [ -f "$b/libmtestdt.a" ] && dtlib=("$b/libmtestdt.a")
  pass=0 total=0
  while read -r g prog np rest; do
    exe=$b/$g/$prog
    mkdir -p "$b/$g"
    # Programs link the library dynamically: a built one is reused; one that failed to
    # build is tried again (the library may have gained what it lacked).
    if [ ! -e "$exe" ]; then
      rm -f "$exe.failed"
      "$cc" -O1 -w "${inc[@]}" "$src/$g/$prog.c" "$b/mtest.o" "$b/mtest_common.o" "$b/mtest_single.o" "${dtlib[@]}" -lm -o "$exe" \
          > "$exe.buildlog" 2>&1 || touch "$exe.failed"
    fi
    args=() envs=() run_limit=$limit
    for kv in $rest; do
      case $kv in
        arg=*) args+=("${kv#arg=}") ;;
        env=*) envs+=("${kv#env=}") ;;
        # the testlist's own limit where it gives more time (MPICH's runtests does the same)
        timeLimit=*) [ "${kv#timeLimit=}" -gt "$run_limit" ] 2>/dev/null && run_limit=${kv#timeLimit=} ;;
      esac
    done
    total=$((total + 1))
    log=$work/logs/$impl/$g.$prog.$total.log
    if [ -e "$exe.failed" ]; then
      verdict="FAIL (build: $(grep -m1 -o "undefined reference to \`[A-Za-z_0-9]*'\|error: .*" "$exe.buildlog" | head -1))"
    else
      set +e
      (cd "$b/$g" && env "${envs[@]}" timeout -k 5 "$run_limit" "${run[@]}" "$np" "$exe" "${args[@]}") < /dev/null > "$log" 2>&1
      st=$?
      set -e
      if [ $st -eq 0 ] && grep -Eq '^[[:space:]]*No [Ee]rrors[[:space:]]*$' "$log"; then
        verdict=pass
        pass=$((pass + 1))
      elif [ $st -eq 124 ] || [ $st -eq 137 ]; then
        verdict="FAIL (timed out after $run_limit s)"
      else
        verdict="FAIL (status $st: $(grep -v '^\s*$' "$log" | tail -1 | cut -c1-100))"
      fi
    fi
    printf '%-8s %-34s np=%-2s %s\n' "$impl" "$g/$prog ${args[*]:-}" "$np" "$verdict"
  done < "$entries"
  summary="$summary$impl: $pass passed of $total runs\n"
done
printf "%b" "$summary"
