"""Channels: create/unlink, Sender (send, loan/publish) and Receiver (recv, read/release).

Timeouts are seconds (float): None waits forever, 0 never blocks (WouldBlock, a
TimeoutError), a positive value bounds the wait (Timeout). A wait longer than
WAIT_SLICE_S is made of several library calls of at most that length, so that Python
gets control back regularly and Ctrl-C (KeyboardInterrupt) ends a blocked call within
about WAIT_SLICE_S. Each library call runs with the GIL released.

The per-message methods (send, loan, publish, recv, read, release, try_recv, poll) are
written for speed: no per-call allocation besides the result, library functions and
constants bound once, a wait with no deadline passed to the library in one call per
slice (docs/python.md, "Per-call cost").
"""
from __future__ import annotations

import errno as E
import math
import operator
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Optional

from ._ffi import ffi, lib, new_out
from ._views import _OWN_REFS, Borrowed, _getrefcount, refused
from .errors import InvalidArgument, c_args, check, error_for

WAIT_SLICE_S = 0.1
_SLICE_NS = int(WAIT_SLICE_S * 1e9)

_EAGAIN = -E.EAGAIN
_CLOSED = -(1 << 31)               # not an errno: the handle was closed by another thread meanwhile
_close_lock = threading.Lock()     # who does a close deferred past a waiting call
_EMSGSIZE = -E.EMSGSIZE
_ETIMEDOUT = -E.ETIMEDOUT
_zimp_send = lib.zimp_send
_zimp_loan = lib.zimp_loan
_zimp_publish = lib.zimp_publish
_zimp_recv = lib.zimp_recv
_zimp_read = lib.zimp_read
_zimp_release = lib.zimp_release
_zimp_unloan = lib.zimp_unloan
_NOTHING = -(1 << 62)              # no result yet (see _recv)


def _recv_stored(r: object, buf: object, cap: int, timeout_ns: int, got: object) -> int:
    """zimp_recv, its result also stored in got[0] (ABI mode: by Python, after the call)."""
    n = _zimp_recv(r, buf, cap, timeout_ns)
    got[0] = n
    return n


# Ctrl-C. Python raises KeyboardInterrupt as soon as a call into C returns, before the
# caller can look at what it returned. A receive that had taken a message by then must
# not lose it: the compiled module's zimp_py_recv stores its result in C before it
# returns, and read/loan learn it from the pointer the library wrote (cleared before
# each call). In ABI mode recv's result is stored by Python, a moment too late.
_recv = getattr(lib, "zimp_py_recv", None) or _recv_stored

CHECKSUM = 0x1
ZERO_ON_RELEASE = 0x2
NO_MEMBARRIER = 0x4                # one sender fences each message; receivers need no membarrier(2)
SPIN_BLOCK = 0                     # sleep in the kernel at once
SPIN_BUSY = (1 << 64) - 1          # poll until the timeout, never sleep
SPIN_ADAPTIVE = (1 << 64) - 2      # the default: a budget learned from recent waits


def _encode(name: str) -> bytes:
    """A channel or heap name as the library takes it."""
    if not isinstance(name, str):
        raise TypeError(f"name must be str, not {type(name).__name__}")
    if "\x00" in name:
        raise InvalidArgument(E.EINVAL, f"name {name!r} has a NUL character")
    return name.encode()


def wait_sliced(call: Callable[[int], int], timeout: Optional[float],
                slice_ns: int = _SLICE_NS) -> int:
    """Runs call(timeout_ns) until it stops timing out or `timeout` seconds passed.

    The library's own -ETIMEDOUT before a slice has run out is not ours (a sender's
    stall timeout): it is returned as it is. `call` returns _CLOSED once its handle
    was closed by another thread (between two slices).
    """
    if timeout is not None:
        if timeout != timeout:
            raise InvalidArgument(E.EINVAL, "timeout is NaN")
        if timeout == math.inf:
            timeout = None                 # forever
        elif timeout <= 0:
            return call(0)
    deadline = None if timeout is None else time.monotonic_ns() + int(timeout * 1e9)
    while True:
        wait = slice_ns
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic_ns())
            if wait <= 0:
                return -E.ETIMEDOUT
        start = time.monotonic_ns()
        rc = call(wait)
        if rc != -E.ETIMEDOUT:
            return rc
        if time.monotonic_ns() - start < wait - 1_000_000:
            return rc                  # ended early: the library's stall timeout
        # else: our slice ran out; Python handles pending signals here, then we go on


@dataclass(frozen=True)
class ChannelInfo:
    """What zimp_info reports about a channel (live members only)."""
    slots: int
    slot_size: int
    max_senders: int
    max_receivers: int
    flags: int
    mode: int
    stall_timeout_ns: int
    segment_size: int
    senders: int
    receivers: int
    creator_pid: int
    layout: tuple[int, int]
    published: int
    lag: int


def create(name: str, *, slots: int = 0, slot_size: int = 0, max_senders: int = 0,
           max_receivers: int = 0, mode: int = 0, stall_timeout: float = 0.0,
           flags: int = 0, heap: Optional[str] = None, exist_ok: bool = False) -> "Channel":
    """Creates channel `name` (0 for a field means the library's default).

    `heap` names an existing heap (Heap.create) that carries messages longer than
    slot_size: send, loan, recv and read then take them as any other message.
    Returns a Channel, a context manager that unlinks the name when the block ends.
    Raises Exists (a FileExistsError) if the name is taken, unless exist_ok.
    """
    cfg = ffi.new("struct zimp_config *")
    with c_args(f"create {name!r}"):
        cfg.slots, cfg.slot_size = slots, slot_size
        cfg.max_senders, cfg.max_receivers = max_senders, max_receivers
        cfg.mode, cfg.flags = mode, flags
    if not 0 <= stall_timeout < 2**63 / 1e9:        # also NaN and infinity
        raise InvalidArgument(E.EINVAL, f"stall_timeout {stall_timeout!r}: seconds, >= 0 and finite")
    cfg.stall_timeout_ns = int(stall_timeout * 1e9)
    heap_name = ffi.new("char[]", _encode(heap)) if heap is not None else ffi.NULL
    cfg.heap = heap_name
    rc = lib.zimp_create(_encode(name), cfg)
    if rc == -E.EEXIST and exist_ok:
        return Channel(name)
    check(rc, f"create {name!r}", detail=True)
    return Channel(name)


def unlink(name: str, *, missing_ok: bool = False) -> None:
    """Removes the channel's name; members keep using it until they close."""
    rc = lib.zimp_unlink(_encode(name))
    if rc == -E.ENOENT and missing_ok:
        return
    check(rc, f"unlink {name!r}", detail=True)


def info(name: str) -> ChannelInfo:
    """Describes channel `name` without joining it."""
    out = new_out("struct zimp_info")
    check(lib.zimp_info(_encode(name), out), f"info {name!r}", detail=True)
    return ChannelInfo(out.slots, out.slot_size, out.max_senders, out.max_receivers,
                       out.flags, out.mode, out.stall_timeout_ns, out.segment_size,
                       out.senders, out.receivers, out.creator_pid,
                       (out.layout_major, out.layout_minor), out.published, out.lag)


def reap(name: Optional[str] = None) -> int:
    """Unlinks `name` (or every channel when None) if no live process uses it."""
    return check(lib.zimp_reap(ffi.NULL if name is None else _encode(name)),
                 "reap", detail=True)


class Channel:
    """A channel's name, as returned by create(): opens handles, unlinks at exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pid = os.getpid()

    def sender(self) -> "Sender":
        """Opens a Sender on this channel."""
        return Sender(self.name)

    def receiver(self) -> "Receiver":
        """Opens a Receiver on this channel."""
        return Receiver(self.name)

    def info(self) -> ChannelInfo:
        """zimp_info for this channel."""
        return info(self.name)

    def unlink(self) -> None:
        """Removes the name (idempotent)."""
        unlink(self.name, missing_ok=True)

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc: object) -> None:
        if os.getpid() == self._pid:        # a forked child leaving the block keeps it
            self.unlink()

    def __repr__(self) -> str:
        return f"zimp.Channel({self.name!r})"


class _Handle:
    """What Sender and Receiver share: the name, the owning pid, not picklable."""

    _closed_msg = "handle is closed"

    def __init__(self, name: str) -> None:
        self.name = name
        self._pid = os.getpid()
        # Calls waiting in the library (one thread, or asyncio waiters), and a close
        # made meanwhile by another thread: the C handle is closed by the last one out,
        # never under a call that still uses it.
        self._waiters = 0
        self._pending: Optional[tuple] = None
        self._on_close: Optional[list] = None

    def _close_c(self, ptr: object, closer: Callable[[object], None]) -> None:
        """Closes C handle `ptr` now, or when the last waiting call leaves."""
        callbacks, self._on_close = self._on_close, None
        for cb in callbacks or ():
            cb()                            # asyncio waiters: wake up, the handle is closed
        self._pending = (ptr, closer)
        if self._waiters == 0:
            self._finish_close()

    def _finish_close(self) -> None:
        with _close_lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending[1](pending[0])

    def _unwait(self) -> None:
        """A waiting call leaves (in a `finally`): the last one does a deferred close."""
        self._waiters -= 1
        if self._pending is not None:
            self._unwaited()

    def _unwaited(self) -> None:
        """After a waiting call left while a close is pending: the last one closes."""
        if self._waiters == 0:
            self._finish_close()

    def _wait_on(self, call: Callable[[int], int], timeout: Optional[float], forever: bool,
                 slice_ns: int = _SLICE_NS) -> int:
        """After a first try found nothing: call(timeout_ns) by slices until it has a
        result, `timeout` passed (unless `forever`), or another thread closed the handle
        (then _CLOSED). Python handles pending signals between two slices."""
        if forever:
            rc = _ETIMEDOUT
            while rc == _ETIMEDOUT:
                if self.closed:
                    return _CLOSED
                rc = call(slice_ns)
            return rc
        return wait_sliced(lambda t: _CLOSED if self.closed else call(t), timeout, slice_ns)

    def _check_owner(self, what: str) -> None:
        """EBADF in a forked child (as the library says for every call it gets there)."""
        if os.getpid() != self._pid:
            raise error_for(-E.EBADF, f"{what}: this handle belongs to process {self._pid}")

    def _need(self, ptr: object) -> object:
        """The C handle, or ValueError once closed (never a dangling pointer)."""
        if ptr is None:
            raise self._closed_error()
        return ptr

    def _closed_error(self) -> ValueError:
        return ValueError(f"{type(self).__name__} {self.name!r}: {self._closed_msg}")

    def __reduce__(self) -> object:
        raise TypeError(f"a zimp {type(self).__name__} belongs to the process that "
                        "opened it: pass the channel name and open one in the child")

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._collect()
        except Exception:
            pass  # never raise from a finaliser


class Loan(Borrowed):
    """A claimed slot: `view` is a writable memoryview over it (zero-copy send).

    Fill the view, then publish() (or leave a `with` block normally). Leaving the block
    by an exception abandons the slot (Sender.abandon): receivers skip it.
    """

    __slots__ = ("_sender", "size")

    def __init__(self, sender: "Sender", ptr: object, size: int) -> None:
        self._sender = sender
        self._ptr = ptr
        raw = self._raw = ffi.buffer(ptr, size)
        self._writable = True
        self.view: memoryview = memoryview(raw)     # released once given back
        self.size = size

    def publish(self, nbytes: Optional[int] = None) -> None:
        """Publishes the first nbytes (default: all) of the loan to every receiver."""
        self._sender.publish(nbytes)

    def __len__(self) -> int:
        return self.size

    def __enter__(self) -> "Loan":
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        sender = self._sender
        if sender._loan is not self:
            return                          # already published or abandoned
        if exc_type is None:
            sender._publish(self, self.size)
            return
        try:
            sender.abandon()
        except BufferError:
            pass    # an array still uses the slot: the loan stays, the block's exception goes on


class Sender(_Handle):
    """Joins a channel as a sender. One thread at a time; not carried across fork."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._s = None
        out = ffi.new("zimp_sender **")
        check(lib.zimp_sender_open(_encode(name), out), f"sender open {name!r}", detail=True)
        self._s = out[0]
        self._loan: Optional[Loan] = None
        self._bufp = ffi.new("void **")
        try:
            stall = info(name).stall_timeout_ns
        except OSError:
            stall = 0
        # A wait slice longer than the channel's stall timeout, so that it can fire;
        # with a stall timeout, -ETIMEDOUT before the slice ends is the library's.
        self._slice_ns = _SLICE_NS + stall
        self._stall = stall != 0

    def send(self, data: object, timeout: Optional[float] = None) -> None:
        """Copies a bytes-like object into the next slot and publishes it."""
        if type(data) is not bytes:
            data = ffi.from_buffer(data)
        n = len(data)
        self._waiters += 1                 # before reading the handle: see _close_c
        try:
            s = self._s
            if s is None:
                raise self._closed_error()
            forever = timeout is None and not self._stall    # no deadline: one call a slice
            rc = _zimp_send(s, data, n, _SLICE_NS if forever else 0)
            if rc == (_ETIMEDOUT if forever else _EAGAIN) and timeout != 0:
                rc = self._wait_on(lambda t: _zimp_send(s, data, n, t), timeout, forever,
                                   self._slice_ns)
        finally:
            self._waiters -= 1             # _unwait, inlined: a per-message path
            if self._pending is not None:
                self._unwaited()
        if rc < 0:
            if rc == _CLOSED:
                raise self._closed_error()
            raise error_for(rc, "send")

    def loan(self, size: int, timeout: Optional[float] = None) -> Loan:
        """Claims the next slot for `size` bytes; returns a Loan (writable view)."""
        s = self._s
        if s is None:
            raise self._closed_error()
        if self._loan is not None:
            self._check_owner("loan")
            raise error_for(-E.EBUSY, "loan: publish or abandon the previous loan first")
        p = self._bufp
        p[0] = ffi.NULL                    # set by the library when it lends a slot
        self._waiters += 1
        try:
            s = self._s
            if s is None:
                raise self._closed_error()
            forever = timeout is None and not self._stall
            rc = _zimp_loan(s, size, p, _SLICE_NS if forever else 0)
            if rc == (_ETIMEDOUT if forever else _EAGAIN) and timeout != 0:
                rc = self._wait_on(lambda t: _zimp_loan(s, size, p, t), timeout, forever,
                                   self._slice_ns)
            if rc == 0 and self._s is not None:
                loan = self._loan = Loan(self, p[0], size)
                return loan
        except OverflowError:
            raise error_for(-E.EINVAL, f"loan: size {size!r} out of range") from None
        except BaseException:
            # The library lent this call a slot the caller never got: give it back
            # (receivers skip its position). Inline, no method call: a second signal's
            # handler runs at the first call made here.
            if p[0] != ffi.NULL and self._s is not None:
                self._loan = None
                _zimp_unloan(self._s, p[0])
                p[0] = ffi.NULL
            raise
        finally:
            self._waiters -= 1             # _unwait, inlined: a per-message path
            if self._pending is not None:
                self._unwaited()
        if rc < 0:
            if rc == _CLOSED:
                raise self._closed_error()
            raise error_for(rc, "loan")
        raise self._closed_error()         # closed by another thread as the loan came:
                                           # the close gave the slot up


    def publish(self, nbytes: Optional[int] = None) -> None:
        """Publishes the outstanding loan (its first nbytes, default all).

        BufferError if a buffer exported from the loan's view is still alive: writing
        through it after publication would change a message receivers are reading.
        """
        loan = self._loan
        if loan is None:
            raise error_for(-E.EINVAL, "publish: no loan outstanding")
        n = loan.size if nbytes is None else operator.index(nbytes)   # TypeError before any change
        if n > loan.size or n < 0:
            raise error_for(-E.EMSGSIZE if n > loan.size else -E.EINVAL,
                            f"publish: {n} bytes, the loan has {loan.size}")
        self._publish(loan, n)

    def _publish(self, loan: Loan, n: int) -> None:
        """publish() once checked; the path of a `with` block's end (one call fewer)."""
        s = self._s
        if s is None:
            raise self._closed_error()
        view = loan.view
        try:
            view.release()
        except BufferError:
            refused(loan, "publish")
        if _getrefcount(loan._raw) > _OWN_REFS:
            refused(loan, "publish")
        self._loan = None
        rc = _zimp_publish(s, loan._ptr, n)
        if rc < 0:
            raise error_for(rc, "publish")

    def abandon(self) -> None:
        """Gives the outstanding loan up (zimp_unloan): receivers skip its position at once."""
        loan = self._loan
        if loan is None:
            return
        loan.take_back("abandon")
        self._loan = None
        check(lib.zimp_unloan(self._need(self._s), loan._ptr), "abandon")

    def stalled(self, cap: int = 64) -> list[int]:
        """Indices of the receivers holding this sender back."""
        with c_args("stalled"):
            arr = ffi.new("unsigned[]", cap)
            n = check(lib.zimp_stalled(self._need(self._s), arr, cap), "stalled")
        return [arr[i] for i in range(min(n, cap))]

    def evict(self, receiver_index: int) -> None:
        """Removes receiver `receiver_index` (its calls then raise Evicted)."""
        with c_args("evict"):
            check(lib.zimp_evict(self._need(self._s), receiver_index), "evict")

    @property
    def index(self) -> int:
        """This sender's index in the channel's table."""
        return check(lib.zimp_sender_index(self._need(self._s)), "sender index")

    def set_spin(self, spin_ns: int) -> None:
        """Waiting policy: SPIN_BLOCK, SPIN_BUSY, SPIN_ADAPTIVE, or a budget in ns."""
        with c_args("set_spin"):
            check(lib.zimp_sender_set_spin(self._need(self._s), spin_ns), "set_spin")

    def close(self) -> None:
        """Leaves the channel (an unpublished loan is abandoned). Idempotent."""
        if self._s is None:
            return
        if self._loan is not None:
            self._loan.take_back("close")
            self._loan = None
        s, self._s = self._s, None
        self._close_c(s, lib.zimp_sender_close)

    def _collect(self) -> None:
        """Finaliser: close, or, while a loan view is exported, when its last user goes."""
        if self._s is None:
            return
        if self._loan is not None:
            try:
                self._loan.take_back("close")
            except BufferError:
                # A live array points into the slot: the handle (and its mapping) is
                # closed when the last such object goes, not before, and not never
                # (its loan would hold every receiver back for the process's life).
                loan, s = self._loan, self._s
                self._loan = self._s = None
                weakref.finalize(loan._raw, lib.zimp_sender_close, s)
                return
            self._loan = None
        self.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._s is None


class Message(Borrowed):
    """A borrowed message: `view` is a read-only memoryview of it, in place.

    Valid until release() (or the end of a `with` block); afterwards the view is
    released and any use of it raises ValueError.
    """

    __slots__ = ("_receiver", "size")

    def __init__(self, receiver: "Receiver", ptr: object, size: int) -> None:
        self._receiver = receiver
        self._ptr = ptr
        raw = self._raw = ffi.buffer(ptr, size)
        self._writable = False
        # toreadonly() shares the buffer; the writable view in between is freed at once
        self.view: memoryview = memoryview(raw).toreadonly()  # released once given back
        self.size = size

    def release(self) -> None:
        """Gives the slot back (idempotent). BufferError while the view is exported."""
        receiver = self._receiver
        if receiver._msg is self:
            receiver._release(self)

    def tobytes(self) -> bytes:
        """A copy of the message."""
        return self.view.tobytes()

    def __bytes__(self) -> bytes:
        return self.view.tobytes()

    def __len__(self) -> int:
        return self.size

    def __enter__(self) -> "Message":
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        receiver = self._receiver
        if receiver._msg is not self:
            return
        if exc_type is None:
            receiver._release(self)
            return
        try:
            receiver._release(self)
        except BufferError:
            pass    # an array still uses the message: it stays borrowed, the block's exception goes on


class _Copied(Message):
    """A message that an interrupted recv() had already copied out (see _recv), handed
    over by the next read() in memory of its own: releasing it gives nothing back."""

    __slots__ = ("_mem",)

    def __init__(self, receiver: "Receiver", data: bytes) -> None:
        mem = ffi.new("char[]", max(len(data), 1))
        ffi.memmove(mem, data, len(data))
        super().__init__(receiver, mem, len(data))
        self._mem = mem


class Receiver(_Handle):
    """Joins a channel as a receiver: every message published after this returned.

    lossy=True: a receiver that never holds senders back. When it falls a ring
    behind, its next call raises MessagesLost once (`missed` counts the positions
    lost) and the one after goes on with the newest messages; a message read in
    place is valid only if its release() does not raise MessagesLost.
    One thread at a time; not carried across fork (open one in the child).
    """

    def __init__(self, name: str, *, lossy: bool = False) -> None:
        super().__init__(name)
        self._r = None
        out = ffi.new("zimp_receiver **")
        opener = lib.zimp_receiver_open_lossy if lossy else lib.zimp_receiver_open
        check(opener(_encode(name), out), f"receiver open {name!r}", detail=True)
        self._r = out[0]
        self._msg: Optional[Message] = None
        self._bufp = ffi.new("const void **")
        self._lenp = ffi.new("size_t *")
        try:
            cap = info(name).slot_size
        except OSError:
            cap = 1 << 20
        self._cap = cap
        self._rbuf = ffi.new("char[]", max(cap, 1))
        self._rview = ffi.buffer(self._rbuf)
        self._got = ffi.new("ssize_t *")
        self._aio_wakers: dict = {}         # zimp.aio waits: event loop -> its tasks' wakers
        # A message taken by a call that an exception (Ctrl-C) ended before it returned
        # it: bytes (copied out) or a Message (still lent); the next receive returns it.
        self._stash: Optional[object] = None

    @property
    def missed(self) -> int:
        """Positions this (lossy) receiver lost to senders since it opened; 0 for others."""
        if self._r is None:
            raise self._closed_error()
        count = ffi.new("uint64_t *")
        check(lib.zimp_receiver_missed(self._r, count), "receiver missed")
        return int(count[0])

    def recv(self, timeout: Optional[float] = None) -> bytes:
        """Copies the next message out and returns it as bytes."""
        if self._stash is not None:
            return self._unstash_bytes()
        buf, cap, got = self._rbuf, self._cap, self._got
        got[0] = _NOTHING
        self._waiters += 1                 # before reading the handle: see _close_c
        try:
            r = self._r
            if r is None:
                raise self._closed_error()
            forever = timeout is None
            rc = _recv(r, buf, cap, _SLICE_NS if forever else 0, got)
            if rc == (_ETIMEDOUT if forever else _EAGAIN) and timeout != 0:
                rc = self._wait_on(lambda t: _recv(r, buf, cap, t, got), timeout, forever)
            if rc >= 0:
                return self._rview[0:rc]
        except BaseException:
            n = got[0]                     # taken: keep it for the next receive (inline,
            if n >= 0:                     # as in loan)
                got[0] = _NOTHING
                self._stash = self._rview[0:n]
            raise
        finally:
            self._waiters -= 1             # _unwait, inlined: a per-message path
            if self._pending is not None:
                self._unwaited()
        if rc == _EMSGSIZE:                # rc < 0 here
            return self._recv_large()
        if rc == _CLOSED:
            raise self._closed_error()
        raise error_for(rc, "recv")

    def _lent_kept(self) -> Message:
        """The kept message that the library still lends (read/poll interrupted), as
        the Message that holds it (made now if the interrupt came before it was)."""
        item = self._stash
        if type(item) is tuple:
            self._msg = Message(self, item[0], item[1])
            self._stash = item = self._msg
        return item

    def _unstash_bytes(self) -> bytes:
        """The kept message, as recv returns it."""
        self._check_owner("recv")
        if type(self._stash) is bytes:
            item, self._stash = self._stash, None
            return item
        msg = self._lent_kept()
        data = msg.view.tobytes()          # a lent message: copy it, give it back
        self._release(msg)
        return data

    def _unstash_message(self) -> Message:
        """The kept message, as read returns it."""
        self._check_owner("read")
        if type(self._stash) is bytes:
            item, self._stash = self._stash, None
            msg = self._msg = _Copied(self, item)
            return msg
        msg = self._lent_kept()
        self._stash = None
        return msg

    def _recv_large(self) -> bytes:
        """A message longer than a slot (a channel with a heap): borrowed, copied once."""
        with self.read(timeout=0) as msg:
            return msg.view.tobytes()

    def recv_into(self, buffer: object, timeout: Optional[float] = None) -> int:
        """Copies the next message into a writable bytes-like object; returns its length.

        MessageTooLarge (the message stays queued) if it does not fit.
        """
        try:
            buf = ffi.from_buffer(buffer, require_writable=True)
        except BufferError as err:         # read-only (a wrong type stays a TypeError)
            raise error_for(-E.EINVAL, f"recv_into: a writable buffer is needed ({err})") from None
        cap = len(buf)
        if self._stash is not None:
            return self._unstash_into(buf, cap)
        got = self._got
        got[0] = _NOTHING
        self._waiters += 1
        try:
            r = self._need(self._r)
            rc = _recv(r, buf, cap, 0, got)
            if rc == _EAGAIN and timeout != 0:
                rc = self._wait_on(lambda t: _recv(r, buf, cap, t, got), timeout, False)
            if rc >= 0:
                return rc
        except BaseException:
            n = got[0]
            if n >= 0:
                got[0] = _NOTHING
                self._stash = ffi.buffer(buf, n)[:]     # a call: see docs/python.md
            raise
        finally:
            self._unwait()
        if rc == _CLOSED:
            raise self._closed_error()
        return check(rc, "recv_into")

    def _unstash_into(self, buf: object, cap: int) -> int:
        """recv_into of the kept message (MessageTooLarge, and it stays kept, if it does
        not fit)."""
        self._check_owner("recv_into")
        item = self._stash if type(self._stash) is bytes else self._lent_kept()
        data = item if type(item) is bytes else item.view
        n = len(data)
        if n > cap:
            raise error_for(-E.EMSGSIZE, f"recv_into: the message has {n} bytes, the buffer {cap}")
        ffi.memmove(buf, data, n)
        self._stash = None
        if type(item) is not bytes:
            self._release(item)
        return n

    def read(self, timeout: Optional[float] = None) -> Message:
        """Borrows the next message in place (zero-copy, read-only); release() it after."""
        r = self._r
        if r is None:
            raise self._closed_error()
        if self._stash is not None:
            return self._unstash_message()
        if self._msg is not None:
            self._check_owner("read")
            raise error_for(-E.EBUSY, "read: release the previous message first")
        bp, lp = self._bufp, self._lenp
        bp[0] = ffi.NULL                   # set by the library when it lends a message
        self._waiters += 1
        try:
            r = self._r
            if r is None:
                raise self._closed_error()
            forever = timeout is None
            rc = _zimp_read(r, bp, lp, _SLICE_NS if forever else 0)
            if rc == (_ETIMEDOUT if forever else _EAGAIN) and timeout != 0:
                rc = self._wait_on(lambda t: _zimp_read(r, bp, lp, t), timeout, forever)
            if rc == 0 and self._r is not None:
                msg = self._msg = Message(self, bp[0], lp[0])
                return msg
        except BaseException:
            # Lent to this call, never returned: the next read/poll (or recv) hands it
            # over. Inline (see loan): the pointer and length, or the Message if made.
            if bp[0] != ffi.NULL and self._r is not None:
                self._stash = self._msg if self._msg is not None else (bp[0], self._lenp[0])
                bp[0] = ffi.NULL
            raise
        finally:
            self._waiters -= 1             # _unwait, inlined: a per-message path
            if self._pending is not None:
                self._unwaited()
        if rc < 0:
            if rc == _CLOSED:
                raise self._closed_error()
            raise error_for(rc, "read")
        raise self._closed_error()         # closed by another thread as the message came:
                                           # the close gave it back

    def release(self) -> None:
        """Releases the borrowed message. BufferError while its view is exported."""
        if type(self._stash) is tuple:     # lent to an interrupted read, no Message yet
            self._lent_kept()
        msg = self._msg
        if msg is None:
            raise error_for(-E.EINVAL, "release: no message borrowed")
        self._release(msg)

    def _release(self, msg: Message) -> None:
        """release() of the borrowed message `msg` (Message.release's path)."""
        r = self._r
        if r is None:
            raise self._closed_error()
        if self._stash is msg:             # given back before the next read took it
            self._stash = None
        if type(msg) is _Copied:           # our own memory: nothing to give back
            self._msg = None
            return
        view = msg.view
        try:
            view.release()
        except BufferError:
            refused(msg, "release")
        if _getrefcount(msg._raw) > _OWN_REFS:
            refused(msg, "release")
        self._msg = None
        rc = _zimp_release(r)
        if rc < 0:
            raise error_for(rc, "release")

    def fileno(self) -> int:
        """A descriptor that select/poll/asyncio report readable while a message waits."""
        return check(lib.zimp_receiver_fd(self._need(self._r)), "fileno")

    def poll(self) -> Optional[Message]:
        """read(timeout=0) that returns None instead of raising WouldBlock."""
        r = self._r
        if r is None:
            raise self._closed_error()
        if self._stash is not None:
            return self._unstash_message()
        if self._msg is not None:
            self._check_owner("poll")
            raise error_for(-E.EBUSY, "poll: release the previous message first")
        bp = self._bufp
        bp[0] = ffi.NULL
        try:
            rc = _zimp_read(r, bp, self._lenp, 0)
            if rc == 0:
                msg = self._msg = Message(self, bp[0], self._lenp[0])
                return msg
        except BaseException:
            # Lent to this call, never returned: the next read/poll (or recv) hands it
            # over. Inline (see loan): the pointer and length, or the Message if made.
            if bp[0] != ffi.NULL and self._r is not None:
                self._stash = self._msg if self._msg is not None else (bp[0], self._lenp[0])
                bp[0] = ffi.NULL
            raise
        if rc == _EAGAIN:
            return None
        raise error_for(rc, "read")

    def try_recv(self) -> Optional[bytes]:
        """recv(timeout=0) that returns None instead of raising WouldBlock."""
        r = self._r
        if r is None:
            raise self._closed_error()
        if self._stash is not None:
            return self._unstash_bytes()
        got = self._got
        got[0] = _NOTHING
        try:
            rc = _recv(r, self._rbuf, self._cap, 0, got)
            if rc >= 0:
                return self._rview[0:rc]
        except BaseException:
            n = got[0]                     # taken: keep it for the next receive (inline,
            if n >= 0:                     # as in loan)
                got[0] = _NOTHING
                self._stash = self._rview[0:n]
            raise
        if rc == _EAGAIN:
            return None
        if rc == _EMSGSIZE:
            return self._recv_large()
        raise error_for(rc, "recv")

    async def arecv(self) -> bytes:
        """Waits without blocking the event loop (see zimp.aio.recv)."""
        from .aio import recv
        return await recv(self)

    @property
    def index(self) -> int:
        """This receiver's index in the channel's table (what Sender.stalled reports)."""
        return check(lib.zimp_receiver_index(self._need(self._r)), "receiver index")

    def set_spin(self, spin_ns: int) -> None:
        """Waiting policy: SPIN_BLOCK, SPIN_BUSY, SPIN_ADAPTIVE, or a budget in ns."""
        with c_args("set_spin"):
            check(lib.zimp_receiver_set_spin(self._need(self._r), spin_ns), "set_spin")

    def close(self) -> None:
        """Leaves the channel. BufferError (and stays open) while a view is exported."""
        if self._r is None:
            return
        if self._msg is not None:
            if type(self._msg) is not _Copied:
                self._msg.take_back("close")
            self._msg = None
        self._stash = None                 # a kept message goes with the handle, as any unread one
        r, self._r = self._r, None
        self._close_c(r, lib.zimp_receiver_close)

    def _collect(self) -> None:
        """Finaliser: close, or, while a message view is exported, when its last user goes."""
        try:
            self.close()
        except BufferError:
            # An array made from the borrowed message still uses the mapping: the
            # handle is closed when the last such object goes (until then the message
            # stays borrowed, and holds senders back, as any unreleased read does).
            msg, r = self._msg, self._r
            self._msg = self._r = None
            weakref.finalize(msg._raw, lib.zimp_receiver_close, r)

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._r is None

    def __iter__(self):  # type: ignore[no-untyped-def]
        """Yields each message as bytes until the channel ends (ChannelClosed)."""
        from .errors import ChannelClosed
        while True:
            try:
                yield self.recv()
            except ChannelClosed:
                return
