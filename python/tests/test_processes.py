"""Several processes: multiprocessing (spawn, fork), subprocess, SIGKILL, Ctrl-C."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import pytest

import zimp

HERE = os.path.dirname(os.path.abspath(__file__))
# Subprocesses import the same zimp package as the tests.
ENV = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(
    os.path.abspath(zimp.__file__))) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def wait_joined(joined: "mp.Semaphore", receivers: int, timeout: float = 20.0) -> None:
    """Waits until `receivers` children said their Receiver is open (they get what
    follows). zimp.info(name).receivers is not that: it counts a receiver still inside
    zimp_receiver_open, which may start after a message sent meanwhile."""
    for _ in range(receivers):
        assert joined.acquire(timeout=timeout), "receivers did not join"


def child_sum(name: str, joined: "mp.Semaphore", out: "mp.Queue[int]") -> None:
    """Receiver role: sums message values until the channel ends."""
    total = 0
    with zimp.Receiver(name) as rx:
        joined.release()
        for data in rx:
            total += int.from_bytes(data, "little")
    out.put(total)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_one_to_many_multiprocessing(name: str, method: str) -> None:
    ctx = mp.get_context(method)
    out, joined = ctx.Queue(), ctx.Semaphore(0)
    with zimp.create(name, slots=16, slot_size=64):
        procs = [ctx.Process(target=child_sum, args=(name, joined, out)) for _ in range(3)]
        for p in procs:
            p.start()
        wait_joined(joined, 3)
        with zimp.Sender(name) as tx:
            for i in range(200):
                tx.send(i.to_bytes(4, "little"), timeout=10)
        results = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(10)
            assert p.exitcode == 0
    assert results == [sum(range(200))] * 3


def child_inherited(tx: zimp.Sender, out: "mp.Queue[str]") -> None:
    """Fork child: an inherited handle refuses to work (-EBADF), it opens its own."""
    try:
        tx.send(b"from child")
        out.put("sent")
    except OSError as err:
        out.put(f"errno {err.errno}")


def test_fork_inherited_handle_refused(chan: zimp.Channel) -> None:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    with chan.sender() as tx, chan.receiver() as rx:
        p = ctx.Process(target=child_inherited, args=(tx, out))
        p.start()
        p.join(10)
        assert out.get(timeout=5) == "errno 9"        # EBADF
        tx.send(b"parent still works")
        assert rx.recv(timeout=5) == b"parent still works"


def test_subprocess_receiver(name: str) -> None:
    code = ("import sys, zimp\n"
            "with zimp.Receiver(sys.argv[1]) as rx:\n"
            "    print('joined', flush=True)\n"
            "    print(b''.join(rx).decode(), flush=True)\n")
    with zimp.create(name, slots=8, slot_size=64):
        proc = subprocess.Popen([sys.executable, "-c", code, name], stdout=subprocess.PIPE,
                                text=True, env=ENV)
        assert proc.stdout.readline().strip() == "joined"
        with zimp.Sender(name) as tx:
            for part in (b"zero", b"-", b"copy"):
                tx.send(part)
        out, _ = proc.communicate(timeout=30)
    assert out.strip() == "zero-copy" and proc.returncode == 0


def holder(name: str, ready: "mp.Event") -> None:
    """Receiver role that borrows a message, then hangs until killed."""
    rx = zimp.Receiver(name)
    ready.set()
    rx.read(timeout=30)
    time.sleep(60)


def test_receiver_killed_sender_goes_on(name: str) -> None:
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    with zimp.create(name, slots=4, slot_size=64):
        with zimp.Receiver(name) as rx, zimp.Sender(name) as tx:
            p = ctx.Process(target=holder, args=(name, ready))
            p.start()
            assert ready.wait(20)
            for i in range(4):
                tx.send(bytes([i]))
            assert [rx.recv() for _ in range(4)] == [bytes([i]) for i in range(4)]
            with pytest.raises(zimp.WouldBlock):      # the hung receiver holds the ring
                tx.send(b"x", timeout=0)
            os.kill(p.pid, signal.SIGKILL)
            p.join(10)
            for i in range(20):                       # a full ring and more: goes on
                tx.send(bytes([i]), timeout=5)
                assert rx.recv(timeout=5) == bytes([i])


def test_ctrl_c_interrupts_blocking_recv(name: str) -> None:
    code = ("import sys, zimp\n"
            "rx = zimp.Receiver(sys.argv[1])\n"
            "print('waiting', flush=True)\n"
            "try:\n"
            "    rx.recv()\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n")
    with zimp.create(name, slots=8, slot_size=64):
        with zimp.Sender(name):                       # so the receiver waits, no EPIPE
            proc = subprocess.Popen([sys.executable, "-c", code, name],
                                    stdout=subprocess.PIPE, text=True, env=ENV)
            assert proc.stdout.readline().strip() == "waiting"
            time.sleep(0.3)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=10)
            assert time.monotonic() - t0 < 3 * zimp.WAIT_SLICE_S + 1.0
    assert out.strip() == "interrupted"


def child_with_outstanding(rx: "zimp.Receiver", tx: "zimp.Sender", out: "mp.Queue") -> None:
    """Forked while the parent had a message read and a loan out: the child's calls on
    the inherited handles are refused with EBADF, the outstanding ones too."""
    codes = []
    for call in (lambda: rx.read(timeout=0), lambda: rx.poll(), lambda: tx.loan(8, timeout=0)):
        try:
            call()
            codes.append("ok")
        except OSError as err:
            codes.append(err.errno)
    out.put(codes)


def test_fork_with_a_read_and_a_loan_outstanding(chan: zimp.Channel) -> None:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    with chan.sender() as tx, chan.receiver() as rx:
        tx.send(b"held")
        msg = rx.read(timeout=5)
        loan = tx.loan(8)
        p = ctx.Process(target=child_with_outstanding, args=(rx, tx, out))
        p.start()
        p.join(10)
        assert out.get(timeout=5) == [9, 9, 9]          # EBADF, not Busy
        assert bytes(msg.view) == b"held"                # the parent's are intact
        msg.release()
        loan.view[:8] = b"parent!!"
        loan.publish()
        assert rx.recv(timeout=5) == b"parent!!"
