"""asyncio helpers: wait for a message without blocking the event loop.

The receiver's descriptor (Receiver.fileno) is registered with loop.add_reader only
while there is nothing to read; a message already queued is returned at once, so a busy
channel costs no system call per message. Readiness may be spurious: the helpers try
again until they get a message or an error (ChannelClosed ends an `async for`).
"""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Optional, TypeVar

from .channel import Message, Receiver
from .errors import ChannelClosed

T = TypeVar("T")


def _wake_all(wakers: list) -> None:
    for wake in list(wakers):
        wake()


async def _until(rx: Receiver, attempt: Callable[[], Optional[T]]) -> T:
    """Calls attempt() until it returns something, sleeping on the fd in between.

    While it sleeps it counts as a call waiting on the receiver: a close() meanwhile
    (from this loop or another thread) wakes it with ValueError, and the descriptor
    is closed only after it left the event loop's selector. Several tasks of one loop
    may wait on one receiver: the descriptor has one reader per loop, which wakes them
    all, and each tries again (one of them gets the message).
    """
    loop = asyncio.get_running_loop()
    while True:
        got = attempt()
        if got is not None:
            return got
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        def closed() -> None:
            if not loop.is_closed():       # a closed loop's task waits for nothing
                loop.call_soon_threadsafe(wake)

        fd = rx.fileno()
        rx._waiters += 1
        try:
            if rx._on_close is None:
                rx._on_close = []
            rx._on_close.append(closed)
            # One reader per event loop; a loop closed with a wait still registered
            # (its task never finished) is forgotten, not waited for.
            for old in [lp for lp in rx._aio_wakers if lp.is_closed()]:
                del rx._aio_wakers[old]
            wakers = rx._aio_wakers.setdefault(loop, [])
            if not wakers:
                loop.add_reader(fd, _wake_all, wakers)
            wakers.append(wake)
            try:
                await ready
            finally:
                wakers.remove(wake)
                if not wakers:
                    rx._aio_wakers.pop(loop, None)
                    loop.remove_reader(fd)
                if rx._on_close is not None and closed in rx._on_close:
                    rx._on_close.remove(closed)
        finally:
            rx._unwait()
        if rx.closed:
            raise rx._closed_error()


async def recv(rx: Receiver) -> bytes:
    """The next message as bytes (a copy)."""
    return await _until(rx, rx.try_recv)


async def read(rx: Receiver) -> Message:
    """The next message borrowed in place (release() it, as with Receiver.read)."""
    return await _until(rx, rx.poll)


async def messages(rx: Receiver) -> AsyncIterator[bytes]:
    """`async for data in zimp.aio.messages(rx)`: every message until the channel ends."""
    while True:
        try:
            yield await recv(rx)
        except ChannelClosed:
            return
