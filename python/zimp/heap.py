"""The shared heap: blocks written in place, named to other processes by a 16-byte Ref.

    with zimp.Heap("frames") as heap:
        block = heap.alloc(640 * 480 * 3)      # writable view + ref; one reference
        fill(block.view)
        tx.send(bytes(block.ref))              # only the handle travels
        ...                                    # keep it until consumers resolved
        block.release()

    consumer: with heap.resolve(zimp.Ref.from_bytes(msg)) as block: use(block.view)

A Ref is not a reference: a producer that releases before its consumers resolve makes
them get Stale. See docs/python.md for a hand-over scheme.
"""
from __future__ import annotations

import errno as E
import os
import struct
from dataclasses import dataclass
from typing import NamedTuple

from ._ffi import ffi, lib, new_out
from ._views import Borrowed, read_only
from .channel import _encode
from .errors import check

_REF = struct.Struct("=IIQ")       # the C struct zimp_ref, native byte order
_CREF = ffi.typeof("struct zimp_ref *")


class Ref(NamedTuple):
    """A position-independent handle to a heap block: (heap id, generation, offset).

    A NamedTuple: hashable (a dict key for blocks in flight) and cheap to make.
    """
    heap: int
    gen: int
    off: int

    def __bytes__(self) -> bytes:
        return _REF.pack(self.heap, self.gen, self.off)

    @classmethod
    def from_bytes(cls, data: object) -> "Ref":
        """Parses the 16 bytes made by bytes(ref) (any bytes-like; extra bytes ignored)."""
        return cls(*_REF.unpack_from(data))

    def _c(self) -> object:
        return ffi.new(_CREF, (self.heap, self.gen, self.off))


@dataclass(frozen=True)
class HeapStats:
    """Heap usage as zimp_heap_stats reports it."""
    size: int
    used: int
    blocks: int
    members: int
    unit: int


Ref.SIZE = _REF.size  # type: ignore[attr-defined]


class Block(Borrowed):
    """One reference to a heap block: `view` (writable after alloc, read-only after
    resolve) and `ref`. release() drops the reference and takes the view back."""

    __slots__ = ("_heap", "ref", "size", "_held", "_cref")

    def __init__(self, heap: "Heap", ptr: object, size: int, ref: Ref, cref: object,
                 writable: bool) -> None:
        self._heap = heap
        self.ref = ref
        self.size = size
        self._ptr = ptr
        raw = self._raw = ffi.buffer(ptr, size)
        self._writable = writable
        self.view: memoryview = memoryview(raw) if writable else read_only(raw)
        self._held = True
        self._cref = cref          # the struct zimp_ref to release with

    def release(self) -> None:
        """Drops this reference (idempotent); BufferError while the view is exported."""
        if not self._held:
            return
        self.take_back("heap block release")
        self._held = False
        self._heap._forget(self)
        check(lib.zimp_heap_release(self._heap._need(), self._cref), "heap release")

    def __len__(self) -> int:
        return self.size

    def __enter__(self) -> "Block":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Heap:
    """An attached heap (one member record). One thread at a time; not across fork."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._h = None
        self._pid = os.getpid()
        out = ffi.new("zimp_heap **")
        check(lib.zimp_heap_open(_encode(name), out), f"heap open {name!r}", detail=True)
        self._h = out[0]
        self._blocks: dict[int, Block] = {}
        self._bufp = ffi.new("void **")
        self._cbufp = ffi.new("const void **")
        self._lenp = ffi.new("size_t *")

    @staticmethod
    def create(name: str, size: int = 0, *, max_members: int = 0, mode: int = 0,
               flags: int = 0, exist_ok: bool = False) -> None:
        """Creates heap `name` with `size` bytes of blocks (0: 64 MiB)."""
        cfg = ffi.new("struct zimp_heap_config *")
        cfg.size, cfg.max_members, cfg.mode, cfg.flags = size, max_members, mode, flags
        rc = lib.zimp_heap_create(_encode(name), cfg)
        if rc == -E.EEXIST and exist_ok:
            return
        check(rc, f"heap create {name!r}", detail=True)

    @staticmethod
    def unlink(name: str, *, missing_ok: bool = False) -> None:
        """Removes the heap's name; attached processes keep their mapping."""
        rc = lib.zimp_heap_unlink(_encode(name))
        if rc == -E.ENOENT and missing_ok:
            return
        check(rc, f"heap unlink {name!r}", detail=True)

    def _need(self) -> object:
        if self._h is None:
            raise ValueError(f"Heap {self.name!r}: handle is closed")
        return self._h

    def _forget(self, block: Block) -> None:
        self._blocks.pop(id(block), None)

    def alloc(self, size: int) -> Block:
        """A writable block of `size` bytes (one reference). HeapFull when no room."""
        c = ffi.new(_CREF)
        check(lib.zimp_heap_alloc(self._need(), size, self._bufp, c), "heap alloc")
        block = Block(self, self._bufp[0], size, Ref(c.heap, c.gen, c.off), c, True)
        self._blocks[id(block)] = block
        return block

    def resolve(self, ref: "Ref | bytes") -> Block:
        """Takes a reference to the block `ref` names; read-only view. Stale if freed."""
        if not isinstance(ref, Ref):
            ref = Ref.from_bytes(ref)
        c = ref._c()
        check(lib.zimp_heap_resolve(self._need(), c, self._cbufp, self._lenp),
              "heap resolve")
        block = Block(self, self._cbufp[0], self._lenp[0], ref, c, False)
        self._blocks[id(block)] = block
        return block

    def release(self, ref: "Ref | bytes") -> None:
        """Drops one reference by handle (for refs whose Block object is gone).

        Prefer Block.release(), which also takes the view back.
        """
        if not isinstance(ref, Ref):
            ref = Ref.from_bytes(ref)
        check(lib.zimp_heap_release(self._need(), ref._c()), "heap release")

    def reap(self) -> int:
        """Frees now what dead members held; returns how many members were cleaned."""
        return check(lib.zimp_heap_reap(self._need()), "heap reap")

    def stats(self) -> HeapStats:
        """Size, bytes and blocks in use, attached members, unit."""
        out = new_out("struct zimp_heap_stats")
        check(lib.zimp_heap_stats(self._need(), out), "heap stats")
        return HeapStats(out.size, out.used, out.blocks, out.members, out.unit)

    def close(self) -> None:
        """Releases every reference this handle holds, then detaches.

        BufferError (and nothing is released) while a block's view is exported.
        """
        if self._h is None:
            return
        for block in list(self._blocks.values()):
            block.take_back("heap close")
            block._held = False
        self._blocks.clear()
        h, self._h = self._h, None
        lib.zimp_heap_close(h)

    def __enter__(self) -> "Heap":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> object:
        raise TypeError("a zimp Heap belongs to the process that opened it: "
                        "pass the heap name and open one in the child")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass    # an exported view keeps the mapping: leave it to process exit


__all__ = ["Heap", "Block", "Ref", "HeapStats"]
