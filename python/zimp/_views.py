"""Memoryviews over shared memory that can be taken back safely.

A slot or heap block is handed to Python as a memoryview made from a raw pointer.
When the library takes the memory back (release, publish, close), the binding first
releases that memoryview, so any later use of it raises ValueError instead of touching
memory that is no longer ours.

memoryview.release() alone is not enough: a NumPy array made with numpy.frombuffer or
numpy.asarray, and a slice such as view[4:], do not register an export on the view;
they share its underlying buffer object, so the view releases fine while they still
point at the memory. Every such object keeps the cffi buffer object we made the view
from alive, though, so after releasing the view the binding looks at that object's
reference count: if anything besides us still holds it, the memory is still in use,
and the take-back is refused with BufferError (the slot or block stays ours; drop the
arrays and try again). An exported pointer cannot be invalidated, so refusing is the
only safe answer.
"""
from __future__ import annotations

import sys

from ._ffi import ffi

# References to `raw` while nothing else uses it: Borrowed._raw, and the argument of
# sys.getrefcount itself.
_OWN_REFS = 2
_getrefcount = sys.getrefcount


def read_only(raw: object) -> memoryview:
    """A read-only memoryview over `raw` (an ffi.buffer)."""
    view = memoryview(raw)
    ro = view.toreadonly()               # shares the underlying buffer object
    view.release()
    return ro


class Borrowed:
    """Memory lent by the library (a loan, a message, a heap block), seen as `view`.

    Subclasses set `_raw = ffi.buffer(ptr, size)`, `_ptr`, `_writable` and `view` (a
    memoryview of `_raw`, read-only unless `_writable`) in their __init__, inline: these
    objects are made once per message.
    """

    __slots__ = ("_raw", "_ptr", "_writable", "view")

    @property
    def address(self) -> int:
        """The memory's address in this process (computed on demand: it costs a cast)."""
        return int(ffi.cast("uintptr_t", self._ptr))

    def in_use(self) -> bool:
        """True while an object made from the view (array, slice) is still alive."""
        return _getrefcount(self._raw) > _OWN_REFS

    def take_back(self, what: str) -> None:
        """Releases the view; BufferError naming `what` if the memory is still used.

        The per-message paths (publish, release) inline these steps.
        """
        try:
            self.view.release()
        except BufferError:
            refused(self, what)
        if _getrefcount(self._raw) > _OWN_REFS:
            refused(self, what)


def refused(b: Borrowed, what: str) -> None:
    """The take-back of `b` failed: the memory stays lent; raises BufferError.

    The view is usable again (a new one over the same memory if it was released).
    """
    if _released(b.view):
        b.view = memoryview(b._raw) if b._writable else read_only(b._raw)
    raise BufferError(f"{what}: {_ADVICE}")


def _released(view: memoryview) -> bool:
    try:
        view.nbytes
    except ValueError:
        return True
    return False


_ADVICE = ("an object made from its memoryview is still alive (a numpy array, a slice, "
           "a buffer exported to C); delete it or copy the data first")
