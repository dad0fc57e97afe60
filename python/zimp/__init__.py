"""zimp: zero-copy, one-to-many message passing between processes over shared memory.

    with zimp.create("demo"):                       # a channel; unlinked at the end
        with zimp.Receiver("demo") as rx, zimp.Sender("demo") as tx:
            tx.send(b"hello")                       # copy in
            with tx.loan(5) as loan:                # or write in place
                loan.view[:] = b"world"
            print(rx.recv())                        # b'hello' (a copy)
            with rx.read() as msg:                  # zero-copy, read-only view
                print(bytes(msg.view))              # b'world'

The binding loads libzimp.so with cffi (ZIMP_LIBRARY names it explicitly).
Documentation: docs/python.md.
"""
from . import aio
from .channel import (CHECKSUM, NO_MEMBARRIER, SPIN_ADAPTIVE, SPIN_BLOCK, SPIN_BUSY,
                      WAIT_SLICE_S, ZERO_ON_RELEASE, Channel, ChannelInfo, Loan, Message, Receiver,
                      Sender, create, info, reap, unlink)
from .errors import (Busy, ChannelClosed, Corrupt, Evicted, Exists, HeapFull,
                     InvalidArgument, MessagesLost, MessageTooLarge, NotFound, NotSupported,
                     PermissionDenied, Stale, TableFull, Timeout, WouldBlock, ZimpError)
from .heap import Block, Heap, HeapStats, Ref

__version__ = "0.1.0"

__all__ = [
    "aio", "create", "unlink", "info", "reap", "Channel", "ChannelInfo", "Sender",
    "Receiver", "Loan", "Message", "Heap", "Block", "Ref", "HeapStats",
    "CHECKSUM", "ZERO_ON_RELEASE", "NO_MEMBARRIER", "SPIN_ADAPTIVE", "SPIN_BLOCK", "SPIN_BUSY",
    "WAIT_SLICE_S", "ZimpError", "Timeout", "WouldBlock", "ChannelClosed", "Evicted",
    "Exists", "NotFound", "PermissionDenied", "MessageTooLarge", "InvalidArgument",
    "Busy", "TableFull", "Corrupt", "Stale", "HeapFull", "MessagesLost", "NotSupported",
]
