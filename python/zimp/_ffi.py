"""Loads libzimp and the binding's cffi module: the compiled one if built, else ABI mode.

Two ways to call the library, with the same `ffi`/`lib` interface:

- API mode (`zimp._zimp_cffi`, compiled when the package is installed, see
  cffi_build.py): a call costs about a third of an ABI-mode call. It is compiled
  without linking libzimp; the library found below is loaded first, with RTLD_GLOBAL,
  and the module's symbols resolve against it.
- ABI mode (no compiler needed): the declarations in _cdef.py are parsed at import and
  the library is opened with dlopen.

ZIMP_CFFI=abi forces ABI mode; ZIMP_CFFI_MODULE names a compiled module file to use
(the CMake build makes one for its tests). MODE tells which one is in use. Both release
the GIL around every call into the library, so a blocked receive never stalls other
Python threads.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.machinery
import importlib.util
import os
from pathlib import Path

from ._cdef import CDEF


def _checkouts() -> list[Path]:
    """Source checkouts whose build folders may hold libzimp.so.

    The checkout this package sits in (PYTHONPATH=python, `pip install -e`), and the one
    an installed package was built from (recorded by setup.py in _origin.py).
    """
    roots = [Path(__file__).resolve().parent.parent.parent]
    try:
        from ._origin import CHECKOUT
        roots.append(Path(CHECKOUT))
    except ImportError:
        pass
    return roots


def _sanitized(build: Path) -> bool:
    """Whether a build folder was configured with ZIMP_SANITIZE (its CMakeCache.txt says).

    Such a libzimp needs its sanitizer's runtime loaded first: dlopen'ed into a plain
    Python it stops the process, so it is tried last.
    """
    try:
        with open(build / "CMakeCache.txt", encoding="utf-8", errors="replace") as cache:
            return any(line.startswith("ZIMP_SANITIZE:") and line.strip().split("=", 1)[1] != ""
                       for line in cache)
    except OSError:
        return False


def candidates() -> list[str]:
    """Where to look for libzimp, most explicit first.

    ZIMP_LIBRARY names the file (the tests point it at the build's libzimp.so); then
    the dynamic loader's own search (an installed libzimp.so.0); then the build folders
    of the checkout (`build` first, then the others, most recently built first, those
    built with a sanitizer last).
    """
    explicit = os.environ.get("ZIMP_LIBRARY")
    if explicit:
        return [explicit]
    found = ["libzimp.so.0"]
    system = ctypes.util.find_library("zimp")
    if system:
        found.append(system)
    for root in _checkouts():
        builds = glob.glob(str(root / "build*" / "src" / "libzimp.so"))
        builds.sort(key=lambda p: (Path(p).parent.parent.name != "build",
                                   _sanitized(Path(p).parent.parent),
                                   -os.path.getmtime(p)))
        found += [b for b in builds if b not in found]
    return found


def _open_library() -> str:
    """dlopens the first loadable candidate with RTLD_GLOBAL; returns its path."""
    errors = []
    for path in candidates():
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            return path
        except OSError as err:
            errors.append(f"{path}: {err}")
    raise ImportError("zimp: cannot load libzimp (set ZIMP_LIBRARY=/path/to/libzimp.so "
                      "or install the C library): " + "; ".join(errors))


def _compiled() -> object | None:
    """The compiled cffi module, or None (not built, or ZIMP_CFFI=abi)."""
    if os.environ.get("ZIMP_CFFI") == "abi":
        return None
    path = os.environ.get("ZIMP_CFFI_MODULE")
    try:
        if not path:
            from . import _zimp_cffi
            return _zimp_cffi
        loader = importlib.machinery.ExtensionFileLoader("zimp._zimp_cffi", path)
        spec = importlib.util.spec_from_file_location("zimp._zimp_cffi", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except ImportError:
        if path or os.environ.get("ZIMP_CFFI") == "api":
            raise                      # asked for explicitly: say why it failed
        return None


LIBRARY = _open_library()
_module = _compiled()
if _module is not None:
    MODE = "api"
    ffi = _module.ffi
    lib = _module.lib
else:
    import cffi
    MODE = "abi"
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(LIBRARY)

# Output structs the library fills get this much room at least, so that a library
# newer than these declarations (a struct grown at its end) cannot write past them.
_OUT_SLACK = 1024


def new_out(ctype: str) -> object:
    """A zeroed `ctype *` (a struct the library writes) with room to spare."""
    size = max(ffi.sizeof(ctype), _OUT_SLACK)
    raw = ffi.new("char[]", size)
    return ffi.gc(ffi.cast(ctype + " *", raw), lambda _p, _keep=raw: None)
