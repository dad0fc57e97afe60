"""The binding's cffi declarations match include/zimp/zimp.h (struct fields, in order)."""
from __future__ import annotations

import os
import re

import pytest

from zimp._ffi import CDEF

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
