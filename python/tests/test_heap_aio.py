"""The shared heap through the binding, and asyncio over several channels."""
from __future__ import annotations

import asyncio
import multiprocessing as mp

import numpy as np
import pytest

import zimp
from conftest import file_offset


def test_heap_alloc_resolve_release(name: str) -> None:
    zimp.Heap.create(name, 1 << 20)
    with zimp.Heap(name) as heap:
        block = heap.alloc(1000)
        assert not block.view.readonly and len(block) == 1000
        block.view[:3] = b"abc"
        ref = zimp.Ref.from_bytes(bytes(block.ref))
        assert ref == block.ref and len(bytes(ref)) == zimp.Ref.SIZE == 16
        with heap.resolve(bytes(ref)) as seen:
            assert seen.view.readonly and seen.view[:3] == b"abc"
            assert seen.address == block.address or file_offset(
                f"zimpheap.{name}", seen.address) == file_offset(
                f"zimpheap.{name}", block.address)
        assert heap.stats().blocks == 1
        arr = np.frombuffer(block.view, dtype=np.uint8)
        with pytest.raises(BufferError):
            block.release()
        del arr
        block.release()
        with pytest.raises(ValueError):
            block.view[0]
        assert heap.stats().blocks == 0
        with pytest.raises(zimp.Stale):
            heap.resolve(ref)
        with pytest.raises(zimp.HeapFull):
            heap.alloc(2 << 20)
        with pytest.raises(MemoryError):
            heap.alloc(2 << 20)
    with pytest.raises(FileExistsError):
        zimp.Heap.create(name)
    zimp.Heap.unlink(name)
    with pytest.raises(FileNotFoundError):
        zimp.Heap(name)


def test_heap_handle_bytes(name: str) -> None:
    """Block.handle is bytes(ref); resolve takes it with bytes after it, or a bytearray."""
    zimp.Heap.create(name, 1 << 20)
    with zimp.Heap(name) as heap:
        block = heap.alloc(64)
        block.view[:2] = b"hi"
        assert block.handle == bytes(block.ref) and len(block.handle) == 16
        extra = block.handle + (7).to_bytes(4, "little")   # a handle and a frame index
        for ref in (extra, bytearray(extra), memoryview(extra), block.ref):
            with heap.resolve(ref) as seen:
                assert seen.view[:2] == b"hi" and seen.ref == block.ref
                assert seen.handle == block.handle
        assert heap.stats().blocks == 1
        with pytest.raises(zimp.InvalidArgument):
            heap.resolve(bytes(16))                  # generation 0: not a handle
        block.release()
        with pytest.raises(zimp.Stale):
            heap.resolve(extra)
        assert heap.stats().blocks == 0


def consume_frames(name: str, joined: "mp.Event", out: "mp.Queue[int]") -> None:
    """Consumer role: resolves each handle, sums the frame, answers on `name`-done."""
    with zimp.Heap(name) as heap, zimp.Receiver(name) as rx, \
            zimp.Sender(name + "-done") as done:
        joined.set()
        for data in rx:
            with heap.resolve(data) as block:
                out.put(int(np.frombuffer(block.view, dtype=np.uint8).sum()))
            done.send(data)


def test_heap_handles_over_a_channel(name: str) -> None:
    """Producer keeps its reference until the consumer says it resolved (docs)."""
    ctx = mp.get_context("spawn")
    out, joined = ctx.Queue(), ctx.Event()
    zimp.Heap.create(name, 8 << 20)
    with zimp.create(name, slots=8, slot_size=64), \
            zimp.create(name + "-done", slots=8, slot_size=64):
        p = ctx.Process(target=consume_frames, args=(name, joined, out))
        p.start()
        with zimp.Heap(name) as heap, zimp.Receiver(name + "-done") as done:
            assert joined.wait(30)          # its Receiver is open (not zimp.info: docs)
            held = {}
            with zimp.Sender(name) as tx:
                for i in range(5):
                    block = heap.alloc(300 * 1024)
                    np.frombuffer(block.view, dtype=np.uint8)[:i + 1] = 1
                    held[block.ref] = block
                    tx.send(bytes(block.ref))
                for _ in range(5):
                    held.pop(zimp.Ref.from_bytes(done.recv(timeout=30))).release()
            assert heap.stats().blocks == 0
        p.join(20)
        assert sorted(out.get(timeout=5) for _ in range(5)) == [1, 2, 3, 4, 5]


def test_asyncio_three_channels(name: str) -> None:
    names = [f"{name}-{k}" for k in range(3)]
    chans = [zimp.create(n, slots=8, slot_size=64) for n in names]
    try:
        rxs = [zimp.Receiver(n) for n in names]
        txs = [zimp.Sender(n) for n in names]

        async def gather_all() -> list[list[bytes]]:
            async def drain(rx: zimp.Receiver) -> list[bytes]:
                return [m async for m in zimp.aio.messages(rx)]

            async def produce() -> None:
                for i in range(5):
                    for k, tx in enumerate(txs):
                        tx.send(f"{k}:{i}".encode())
                    await asyncio.sleep(0.01)
                for tx in txs:
                    tx.close()                        # ends each drain (ChannelClosed)
            tasks = [asyncio.create_task(drain(rx)) for rx in rxs]
            await produce()
            return await asyncio.wait_for(asyncio.gather(*tasks), 10)

        got = asyncio.run(gather_all())
        assert got == [[f"{k}:{i}".encode() for i in range(5)] for k in range(3)]
        for rx in rxs:
            rx.close()
    finally:
        for ch in chans:
            ch.unlink()


def test_async_read_zero_copy(chan: zimp.Channel) -> None:
    with chan.receiver() as rx, chan.sender() as tx:
        async def main() -> bytes:
            asyncio.get_running_loop().call_later(0.05, tx.send, b"later")
            msg = await zimp.aio.read(rx)
            with msg:
                return bytes(msg)
        assert asyncio.run(main()) == b"later"
        tx.send(b"x")
        assert asyncio.run(rx.arecv()) == b"x"


def test_large_messages_through_the_channels_heap(name: str) -> None:
    """A channel created with a heap takes messages longer than its slots: send/recv
    copy them, loan/read put them in a heap block read in place."""
    zimp.Heap.create(name, 8 << 20)
    with zimp.create(name, slots=8, slot_size=64, heap=name):
        with zimp.Receiver(name) as rx, zimp.Sender(name) as tx:
            big = bytes(range(256)) * 4096                 # 1 MiB
            tx.send(big)
            assert rx.recv(timeout=5) == big
            tx.send(b"small")
            assert rx.try_recv() == b"small"
            with tx.loan(300_000) as loan:
                frame = np.frombuffer(loan.view, dtype=np.uint8)
                frame[:] = 9
                frame[-1] = 1
                del frame
            with rx.read(timeout=5) as msg:
                got = np.frombuffer(msg.view, dtype=np.uint8)
                assert len(got) == 300_000 and got[0] == 9 and got[-1] == 1
                file_offset(f"zimpheap.{name}", msg.address)   # in the heap, in place
                del got
            with pytest.raises(MemoryError):               # zimp.HeapFull
                tx.send(bytes(16 << 20))                   # larger than the heap


def test_heap_release_by_ref_takes_the_block_view_back(name: str) -> None:
    """Heap.release(ref) of a reference a Block holds is that Block's release: its view
    goes with the reference, so it never sees the block's next owner."""
    zimp.Heap.create(name, 1 << 20)
    with zimp.Heap(name) as heap:
        b = heap.alloc(256)
        heap.release(b.ref)
        c = heap.alloc(256)                     # may reuse the same units
        with pytest.raises(ValueError):
            b.view[:5] = b"BBBBB"
        c.view[:3] = b"NEW"
        r1 = heap.resolve(c.ref)
        r2 = heap.resolve(c.ref)
        heap.release(c.ref)                     # one of the three references, with its view
        held = [blk for blk in (c, r1, r2) if blk._held]
        assert len(held) == 2
        for blk in held:
            assert bytes(blk.view[:3]) == b"NEW"
            blk.release()
        assert heap.stats().blocks == 0
        with pytest.raises(zimp.InvalidArgument):
            zimp.Ref.from_bytes(b"abc")          # too short for a handle
        with pytest.raises(ValueError):
            heap.resolve(b"\0" * 8)


def test_asyncio_receiver_closed_while_waiting(name: str) -> None:
    """close() while zimp.aio.recv waits: the wait raises ValueError, and a receiver
    opened afterwards (maybe on the same descriptor number) is waited for normally."""
    a, b = name + "-a", name + "-b"

    async def main() -> None:
        rx1 = zimp.Receiver(a)
        t1 = asyncio.create_task(zimp.aio.recv(rx1))
        await asyncio.sleep(0.05)
        rx1.close()
        with pytest.raises(ValueError):
            await asyncio.wait_for(t1, 5)
        rx2 = zimp.Receiver(b)
        t2 = asyncio.create_task(zimp.aio.recv(rx2))
        await asyncio.sleep(0.05)
        with zimp.Sender(b) as tx:
            tx.send(b"hello")
            assert await asyncio.wait_for(t2, 5) == b"hello"
        rx2.close()

    with zimp.create(a), zimp.create(b):
        asyncio.run(main())


def test_asyncio_two_tasks_wait_on_one_receiver(chan: zimp.Channel) -> None:
    """Two tasks awaiting the same receiver both get a message (the descriptor has one
    reader that wakes every waiter; a second add_reader would have replaced the first
    task's, which then waited for ever)."""
    async def main() -> list:
        with chan.receiver() as rx, chan.sender() as tx:
            a = asyncio.ensure_future(zimp.aio.recv(rx))
            b = asyncio.ensure_future(zimp.aio.recv(rx))
            await asyncio.sleep(0.1)                       # both asleep on the descriptor
            tx.send(b"one")
            await asyncio.sleep(0.05)
            tx.send(b"two")
            return sorted(await asyncio.wait_for(asyncio.gather(a, b), 10))

    assert asyncio.run(main()) == [b"one", b"two"]


def test_asyncio_wait_left_on_a_closed_loop(chan: zimp.Channel) -> None:
    """A zimp.aio wait whose event loop was closed under it (its task never finished)
    neither keeps a later loop's wait from being woken nor makes close() raise."""
    with chan.receiver() as rx, chan.sender() as tx:
        old = asyncio.new_event_loop()
        stuck = old.create_task(zimp.aio.recv(rx))
        old.run_until_complete(asyncio.sleep(0.05))     # the task sleeps on the descriptor
        old.close()

        async def main() -> bytes:
            asyncio.get_running_loop().call_later(0.05, tx.send, b"hello")
            return await asyncio.wait_for(zimp.aio.recv(rx), 5)

        assert asyncio.run(main()) == b"hello"
        del stuck
