#!/usr/bin/env sh
# `pip install ./python` into a clean virtual environment, then the installed package,
# run from outside the checkout with no ZIMP_* variables set, must find libzimp:
#   1. built in the checkout (BUILD_DIR/src/libzimp.so, found through the checkout the
#      package records when it is built), with the compiled cffi module in use;
#   2. installed in a prefix, found by the dynamic loader through LD_LIBRARY_PATH;
#   3. in ABI mode (ZIMP_CFFI=abi).
# Each run sends and receives a message. Exits 77 (skipped) when PyPI cannot be reached:
# pip needs setuptools and cffi from it for the build.
#   python/tests/test_install.sh BUILD_DIR
set -eu
build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/zimp-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset ZIMP_LIBRARY ZIMP_CFFI ZIMP_CFFI_MODULE PYTHONPATH || true
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

if ! timeout 60 python3 -m pip download -q --no-deps -d "$tmp/probe" cffi >/dev/null 2>&1; then
  echo "SKIP: PyPI not reachable (pip needs setuptools and cffi for the build)"
  exit 77
fi

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q "$repo/python" > "$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1; }

cat > "$tmp/check.py" <<'EOF'
import os, sys, zimp
from zimp import _ffi
want_mode, want_lib = sys.argv[1], sys.argv[2]
assert "site-packages" in zimp.__file__, zimp.__file__      # the installed package
assert _ffi.MODE == want_mode, (_ffi.MODE, want_mode)
assert _ffi.LIBRARY == want_lib, (_ffi.LIBRARY, want_lib)
name = f"install-check-{os.getpid()}"
with zimp.create(name, slots=4, slot_size=64):
    with zimp.Receiver(name) as rx, zimp.Sender(name) as tx:
        tx.send(b"installed")
        assert rx.recv(timeout=5) == b"installed"
print(f"ok: {_ffi.MODE} mode, {_ffi.LIBRARY}")
EOF
cd "$tmp"
venv_py="$tmp/venv/bin/python"
mode=abi
if "$venv_py" -c "import zimp._zimp_cffi" 2>/dev/null; then
  mode=api
else
  # a compiled module may be missing only where no compiler or Python.h is at hand
  if cc --version >/dev/null 2>&1 && [ -f "$("$venv_py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
    grep -i "zimp" "$tmp/pip.log" || true
    echo "FAIL: a compiler and Python.h are here, but the compiled module was not built"
    exit 1
  fi
  echo "note: no compiler or Python.h: checking the ABI-mode install only"
fi

# 1. the checkout's build (the loader knows no libzimp: LD_LIBRARY_PATH empty)
if LD_LIBRARY_PATH= "$venv_py" -c "import ctypes; ctypes.CDLL('libzimp.so.0')" 2>/dev/null; then
  echo "note: a libzimp.so.0 is installed system-wide; the checkout's build is not tried first"
  lib=libzimp.so.0
else
  lib=$(LD_LIBRARY_PATH= "$venv_py" -c "from zimp import _ffi; print(_ffi.LIBRARY)")
  case $lib in "$repo"/build*/src/libzimp.so) ;; *) echo "FAIL: found $lib, not a build of $repo"; exit 1 ;; esac
fi
LD_LIBRARY_PATH= "$venv_py" "$tmp/check.py" "$mode" "$lib"

# 2. an installed libzimp, found by the dynamic loader (copied as `cmake --install`
#    lays it out: libzimp.so -> libzimp.so.0 -> libzimp.so.0.x.y)
libdir="$tmp/prefix/lib"
mkdir -p "$libdir"
cp -P "$build"/src/libzimp.so* "$libdir/"
LD_LIBRARY_PATH="$libdir" "$venv_py" "$tmp/check.py" "$mode" libzimp.so.0

# 3. ABI mode
ZIMP_CFFI=abi LD_LIBRARY_PATH="$libdir" "$venv_py" "$tmp/check.py" abi libzimp.so.0
echo "PASS: pip install ./python in a clean virtual environment"
