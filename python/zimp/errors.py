"""Exceptions: one class per zimp error, each also a subclass of the matching built-in.

A caller can catch the built-in it already knows (``except BrokenPipeError``) or the
zimp class (``except zimp.ChannelClosed``). Every exception carries the negative errno
the C call returned (as a positive ``errno``), the library's text, and the thread-local
detail string of the last failed open/create when there is one.
"""
from __future__ import annotations

import errno as E

from ._ffi import ffi, lib


class ZimpError(OSError):
    """Base class of every error the library reports."""


class Timeout(ZimpError, TimeoutError):
    """The wait ran out (-ETIMEDOUT), or a stalled receiver held the slot too long."""


class WouldBlock(Timeout, BlockingIOError):
    """timeout=0 and the call would have had to wait (-EAGAIN)."""


class ChannelClosed(ZimpError, BrokenPipeError):
    """-EPIPE: drained, and every sender that had opened the channel has left."""


class Evicted(ZimpError, ConnectionResetError):
    """-ECONNRESET: this handle was evicted by another member."""


class Exists(ZimpError, FileExistsError):
    """-EEXIST: the name is taken."""


class NotFound(ZimpError, FileNotFoundError):
    """-ENOENT: no channel or heap of that name (or no such member)."""


class PermissionDenied(ZimpError, PermissionError):
    """-EACCES / -EPERM: mode bits, a segment owned by an untrusted user, or a one-sender
    channel whose receivers need membarrier(2), which this process cannot call."""


class MessageTooLarge(ZimpError, ValueError):
    """-EMSGSIZE: larger than a slot, or a buffer too small (the message stays queued)."""


class InvalidArgument(ZimpError, ValueError):
    """-EINVAL / -ENAMETOOLONG: a bad name, config, handle or call sequence."""


class Busy(ZimpError):
    """-EBUSY: a loan or borrow is already outstanding on this handle."""


class TableFull(ZimpError):
    """-EUSERS: the channel's sender/receiver table or the heap's members are full."""


class Corrupt(ZimpError):
    """-EPROTO / -EBADMSG: the segment or a message failed validation."""


class Stale(ZimpError):
    """-ESTALE: the heap block was freed (or freed and reused) before it was resolved."""


class HeapFull(ZimpError, MemoryError):
    """-ENOMEM: no free run of heap units that long."""


class MessagesLost(ZimpError, BufferError):
    """-ENOBUFS: a lossy receiver fell a ring behind (or what it read in place was
    written over); Receiver.missed counts the positions lost. The next call goes on."""


class NotSupported(ZimpError):
    """-ENOTSUP: e.g. a lossy receiver on a ZERO_ON_RELEASE channel."""


_BY_ERRNO: dict[int, type[ZimpError]] = {
    E.ETIMEDOUT: Timeout,
    E.EAGAIN: WouldBlock,
    E.EPIPE: ChannelClosed,
    E.ECONNRESET: Evicted,
    E.EEXIST: Exists,
    E.ENOENT: NotFound,
    E.EACCES: PermissionDenied,
    E.EPERM: PermissionDenied,
    E.EMSGSIZE: MessageTooLarge,
    E.EINVAL: InvalidArgument,
    E.ENAMETOOLONG: InvalidArgument,
    E.EBUSY: Busy,
    E.EUSERS: TableFull,
    E.EPROTO: Corrupt,
    E.EBADMSG: Corrupt,
    E.ESTALE: Stale,
    E.ENOMEM: HeapFull,
    E.ENOBUFS: MessagesLost,
    E.ENOTSUP: NotSupported,
}


def error_for(rc: int, what: str, *, detail: bool = False) -> ZimpError:
    """Builds the exception for a negative return code of call `what`.

    `detail` adds zimp_last_detail(), which the library keeps for open/create/info
    failures only (on other calls it may describe an older failure).
    """
    code = -rc
    text = ffi.string(lib.zimp_strerror(rc)).decode(errors="replace")
    extra = ffi.string(lib.zimp_last_detail()).decode(errors="replace") if detail else ""
    message = f"{what}: {text}" + (f" ({extra})" if extra else "")
    cls = _BY_ERRNO.get(code, ZimpError)
    exc = cls(code, message)
    exc.detail = extra
    return exc


def check(rc: int, what: str, *, detail: bool = False) -> int:
    """Returns rc when it is not negative, raises the matching exception otherwise."""
    if rc < 0:
        raise error_for(rc, what, detail=detail)
    return rc


class c_args:
    """`with c_args(what):` an argument that does not fit its C type (cffi raises
    OverflowError, or ValueError for a negative array length) raises InvalidArgument,
    as the library's -EINVAL would."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> "c_args":
        return self

    def __exit__(self, kind: object, err: object, tb: object) -> bool:
        if kind is OverflowError or (kind is ValueError and not isinstance(err, ZimpError)):
            raise InvalidArgument(E.EINVAL, f"{self.what}: {err}") from None
        return False
