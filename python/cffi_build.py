"""Builds zimp._zimp_cffi, the binding's compiled (cffi API-mode) module.

A call through it costs a third of an ABI-mode call (docs/python.md, "Why cffi, and
which mode"). It is compiled without linking libzimp: its zimp_* symbols are resolved
when it is imported, against the libzimp that zimp/_ffi.py has loaded first (found at
run time as in ABI mode). With include/zimp/zimp.h at hand (the checkout's, ZIMP_INCLUDE,
or an installed one) the module is compiled against the header, so the compiler checks
the declarations and cffi checks the struct layouts; without it, against the
declarations in zimp/_cdef.py.

    setup.py:  cffi_modules=["cffi_build.py:ffi"]
    CMake:     python3 cffi_build.py OUTDIR      (OUTDIR/zimp/_zimp_cffi*.so)
"""
from __future__ import annotations

import os
import runpy
import sys

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "zimp._zimp_cffi"
CDEF = runpy.run_path(os.path.join(HERE, "zimp", "_cdef.py"))["CDEF"]


def header_dir() -> str | None:
    """The folder holding zimp/zimp.h: ZIMP_INCLUDE, the checkout's, or an installed one."""
    candidates = [os.environ.get("ZIMP_INCLUDE", ""), os.path.join(HERE, "..", "include"),
                  "/usr/local/include", "/usr/include"]
    for folder in candidates:
        if folder and os.path.exists(os.path.join(folder, "zimp", "zimp.h")):
            return os.path.abspath(folder)
    return None


# Helpers compiled into the module (they are not libzimp's): a call whose result must
# survive an exception raised as it returns (Ctrl-C: Python raises KeyboardInterrupt as
# soon as a call into C comes back) also stores that result where the caller can find
# it afterwards. The binding uses them when present (zimp/channel.py, "Ctrl-C").
HELPERS_CDEF = """
ssize_t zimp_py_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns, ssize_t *got);
"""
HELPERS_SOURCE = """
static ssize_t zimp_py_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns,
                            ssize_t *got)
{
    ssize_t n = zimp_recv(r, buf, cap, timeout_ns);
    *got = n;
    return n;
}
"""


def make_ffi() -> cffi.FFI:
    """The FFI of the compiled module (set_source done, not compiled)."""
    builder = cffi.FFI()
    builder.cdef(CDEF + HELPERS_CDEF)
    include = header_dir()
    if include:
        builder.set_source(MODULE, "#include <zimp/zimp.h>\n" + HELPERS_SOURCE,
                           include_dirs=[include], extra_compile_args=["-O2"])
    else:
        builder.set_source(MODULE, "#include <stddef.h>\n#include <stdint.h>\n"
                           "#include <sys/types.h>\n" + CDEF + HELPERS_SOURCE,
                           extra_compile_args=["-O2"])
    return builder


ffi = make_ffi()

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: cffi_build.py OUTDIR")
    ffi.compile(tmpdir=sys.argv[1], verbose=False)
