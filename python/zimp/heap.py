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
from ._views import _OWN_REFS, Borrowed, _getrefcount, read_only, refused
from .channel import _encode
from .errors import InvalidArgument, c_args, check, error_for

_REF = struct.Struct("=IIQ")       # the C struct zimp_ref, native byte order
_REF_SIZE = _REF.size
_CREF = ffi.typeof("struct zimp_ref *")
_new = ffi.new
_from_buffer = ffi.from_buffer
_buffer = ffi.buffer
_heap_alloc = lib.zimp_heap_alloc
_heap_resolve = lib.zimp_heap_resolve
_heap_release = lib.zimp_heap_release
_tuple_new = tuple.__new__         # a Ref without NamedTuple's Python-level __new__


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
        try:
            return _tuple_new(cls, _REF.unpack_from(data))
        except struct.error as e:
            raise InvalidArgument(E.EINVAL, f"a heap handle has {_REF_SIZE} bytes: {e}") from None

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
    resolve), `ref` and `handle`. release() drops the reference and takes the view back."""

    __slots__ = ("_heap", "_ref", "size", "_held", "_cref")

    def __init__(self, heap: "Heap", ptr: object, size: int, ref: "Ref | None",
                 cref: object, writable: bool) -> None:
        self._heap = heap
        self._ref = ref            # made from _cref when first asked for
        self.size = size
        self._ptr = ptr
        raw = self._raw = _buffer(ptr, size)
        self._writable = writable
        self.view: memoryview = memoryview(raw) if writable else read_only(raw)
        self._held = True
        self._cref = cref          # the struct zimp_ref to release with

    @property
    def ref(self) -> Ref:
        """The block's handle as a Ref (heap, gen, off)."""
        ref = self._ref
        if ref is None:
            c = self._cref
            ref = self._ref = _tuple_new(Ref, (c.heap, c.gen, c.off))
        return ref

    @property
    def handle(self) -> bytes:
        """The block's handle as the 16 bytes of struct zimp_ref (what bytes(ref) gives)."""
        return _buffer(self._cref, _REF_SIZE)[:]

    def release(self) -> None:
        """Drops this reference (idempotent); BufferError while the view is exported."""
        if not self._held:
            return
        view = self.view
        try:
            view.release()
        except BufferError:
            refused(self, "heap block release")
        if _getrefcount(self._raw) > _OWN_REFS:
            refused(self, "heap block release")
        self._held = False
        heap = self._heap
        heap._blocks.pop(id(self), None)
        rc = _heap_release(heap._need(), self._cref)
        if rc < 0:
            raise error_for(rc, "heap release")

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
        with c_args(f"heap create {name!r}"):
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
        h = self._h
        if h is None:
            self._need()
        c = _new(_CREF)
        bp = self._bufp
        try:
            rc = _heap_alloc(h, size, bp, c)
        except OverflowError:
            raise error_for(-E.EINVAL, f"heap alloc: size {size!r} out of range") from None
        if rc < 0:
            raise error_for(rc, "heap alloc")
        block = Block(self, bp[0], size, None, c, True)
        self._blocks[id(block)] = block
        return block

    def resolve(self, ref: "Ref | bytes") -> Block:
        """Takes a reference to the block `ref` names; read-only view. Stale if freed.

        `ref`: a Ref, or bytes-like whose first 16 bytes are one (bytes(ref),
        Block.handle; what follows is ignored).
        """
        h = self._h
        if h is None:
            self._need()
        if type(ref) is bytes and len(ref) >= _REF_SIZE:
            c = _from_buffer(_CREF, ref)       # immutable: read in place, kept alive by c
            ref = None
        else:
            if not isinstance(ref, Ref):
                ref = Ref.from_bytes(ref)
            with c_args("heap resolve"):
                c = _new(_CREF, ref)
        bp, lp = self._cbufp, self._lenp
        rc = _heap_resolve(h, c, bp, lp)
        if rc < 0:
            raise error_for(rc, "heap resolve")
        block = Block(self, bp[0], lp[0], ref, c, False)
        self._blocks[id(block)] = block
        return block

    def release(self, ref: "Ref | bytes") -> None:
        """Drops one reference by handle.

        If a Block of this handle holds that reference, it is that Block's release()
        (its view is taken back; BufferError while it is exported), so that no view
        outlives its reference; otherwise the reference is dropped by handle alone.
        """
        if not isinstance(ref, Ref):
            ref = Ref.from_bytes(ref)
        for block in self._blocks.values():
            c = block._cref
            if block._held and (c.heap, c.gen, c.off) == ref:
                block.release()
                return
        check(lib.zimp_heap_release(self._need(), ref._c()), "heap release")

    def reap(self) -> int:
        """Frees now what dead members held; returns how many members were cleaned."""
        return check(lib.zimp_heap_reap(self._need()), "heap reap")

    def stats(self) -> HeapStats:
        """Size, bytes and blocks in use (kept blocks count as free), members, unit."""
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
