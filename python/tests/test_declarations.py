"""The binding's cffi declarations match include/zimp/zimp.h (struct fields, in order),
every declared function resolves, and the cffi mode in use is the one asked for."""
from __future__ import annotations

import os
import re

import pytest

from zimp import _ffi
from zimp._cdef import CDEF

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "zimp", "zimp.h")


def fields(text: str, struct: str) -> list[str]:
    """Field names of `struct NAME { ... };` in C text, comments removed."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = re.search(r"struct %s \{(.*?)\};" % struct, text, re.S)
    assert body, f"struct {struct} not found"
    names = []
    for decl in body.group(1).split(";"):
        decl = decl.strip()
        if decl:
            first, *rest = decl.split(",")
            names += [first.split()[-1]] + [r.strip() for r in rest]
    return names


@pytest.mark.parametrize("struct", ["zimp_config", "zimp_info", "zimp_heap_config",
                                    "zimp_ref", "zimp_heap_stats"])
def test_struct_matches_header(struct: str) -> None:
    if not os.path.exists(HEADER):
        pytest.skip("no zimp.h next to the package (installed elsewhere)")
    with open(HEADER) as f:
        header = f.read()
    assert fields(CDEF, struct) == fields(header, struct)


def test_every_declared_function_resolves() -> None:
    names = re.findall(r"\b(zimp_\w+)\(", CDEF)
    assert len(names) > 30
    for fn in names:
        assert callable(getattr(_ffi.lib, fn)), fn


def test_cffi_mode_is_the_one_asked_for() -> None:
    """ZIMP_CFFI=abi forces ABI mode; a compiled module named or installed is used."""
    if os.environ.get("ZIMP_CFFI") == "abi":
        assert _ffi.MODE == "abi"
    elif os.environ.get("ZIMP_CFFI_MODULE"):
        assert _ffi.MODE == "api"
        assert _ffi.lib.__name__ == "zimp._zimp_cffi.lib"
    assert os.path.exists(_ffi.LIBRARY) or _ffi.LIBRARY.startswith("libzimp")
