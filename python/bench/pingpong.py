"""64-byte ping-pong between two Python processes over zimp, next to the same in C.

    python3 python/bench/pingpong.py [--modes busy,block] [--repeat 7] [--rounds 20000]
                                     [--cffi api,abi] [--c build/python/pingpong_c]
                                     [--cpus PING,ECHO]

Each repeat runs, one after the other, every (mode, cffi mode) Python ping-pong and the
C program pingpong_c (python/bench/pingpong_c.c: the same channels, calls and waiting
policy) in fresh processes, so that Python and C are measured within the same minute.
The summary gives, per row, the median over the repeats of each run's median one-way
latency (half a round trip) and p99, and the 1-minute load average around the runs.
Then the cost of single calls in one process: raw cffi calls, the binding's methods,
and the same C calls (from pingpong_c), and the GIL's share (ctypes CDLL, which
releases the GIL, against PyDLL, which keeps it).

--cpus pins the pinging process and the echo, in Python and in C alike (the same CPU:
a wake-up is a context switch on it; two CPUs: a wake-up crosses to the other one,
which may be idle). Unpinned, the scheduler may place the two programs differently,
and the two placements differ by up to 5x in blocking mode on this VM.

    --one MODE     one Python ping-pong (what the repeats run), one JSON line
    --calls        the single-call costs of this process's binding, one JSON line
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def spin_of(mode: str) -> int:
    import zimp
    return {"busy": zimp.SPIN_BUSY, "block": zimp.SPIN_BLOCK,
            "adaptive": zimp.SPIN_ADAPTIVE}[mode]


def pin(cpu: int | None) -> None:
    """Pins this process to `cpu` (None: leaves it)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def echo(name: str, mode: str, rounds: int, cpu: int | None = None) -> None:
    """Answers every ping with the same bytes (the child process)."""
    pin(cpu)
    import zimp
    with zimp.Receiver(name + "-ping") as rx, zimp.Sender(name + "-pong") as tx:
        rx.set_spin(spin_of(mode))
        tx.set_spin(spin_of(mode))
        tx.send(b"joined")     # our receiver gets every ping from now on
        send, recv = tx.send, rx.recv
        for _ in range(rounds):
            send(recv())


def one(mode: str, rounds: int, cpus: tuple[int, int] | None = None) -> dict:
    """One ping-pong: this process pings, a spawned one echoes."""
    import multiprocessing as mp

    import zimp
    from zimp._ffi import MODE
    name = f"pingpong-{os.getpid()}"
    with zimp.create(name + "-ping", slots=64, slot_size=64), \
            zimp.create(name + "-pong", slots=64, slot_size=64):
        p = mp.get_context("spawn").Process(
            target=echo, args=(name, mode, rounds, cpus[1] if cpus else None))
        pin(cpus[0] if cpus else None)
        with zimp.Receiver(name + "-pong") as rx:
            p.start()
            # Not zimp.info(...).receivers: it counts a receiver still inside
            # zimp_receiver_open, which may start after a message sent meanwhile.
            assert rx.recv(timeout=60) == b"joined"
            with zimp.Sender(name + "-ping") as tx:
                rx.set_spin(spin_of(mode))
                tx.set_spin(spin_of(mode))
                msg = bytes(64)
                send, recv, clock = tx.send, rx.recv, time.perf_counter_ns
                rtts = [0] * rounds
                for i in range(rounds):
                    t = clock()
                    send(msg)
                    recv()
                    rtts[i] = clock() - t
            p.join(30)
    rtts.sort()
    return {"impl": "python", "cffi": MODE, "mode": mode, "rounds": rounds, "cpus": cpus,
            "one_way_p50_us": rtts[rounds // 2] / 2e3,
            "one_way_p99_us": rtts[rounds * 99 // 100] / 2e3,
            "loadavg": list(os.getloadavg())}


def per_call_ns(body, n: int = 100_000) -> float:
    """ns per call of body(n) (a loop of n calls), the median of 5 runs."""
    runs = []
    for _ in range(5):
        t = time.perf_counter_ns()
        body(n)
        runs.append((time.perf_counter_ns() - t) / n)
    return statistics.median(runs)


def calls() -> dict:
    """Single-call costs in this process: raw cffi calls, binding methods, GIL share."""
    import ctypes

    import zimp
    from zimp._ffi import LIBRARY, MODE, ffi, lib
    name = f"pingcalls-{os.getpid()}"
    out: dict = {"impl": "python", "cffi": MODE}
    with zimp.create(name, slots=64, slot_size=64):
        with zimp.Receiver(name) as rx, zimp.Sender(name) as tx:
            r, s, buf, msg = rx._r, tx._s, rx._rbuf, bytes(64)

            def loop(n: int) -> None:
                for _ in range(n):
                    pass

            def raw_index(n: int) -> None:
                f = lib.zimp_sender_index
                for _ in range(n):
                    f(s)

            def raw_recv_empty(n: int) -> None:
                f = lib.zimp_recv
                for _ in range(n):
                    f(r, buf, 64, 0)

            def raw_pair(n: int) -> None:
                fs, fr = lib.zimp_send, lib.zimp_recv
                for _ in range(n):
                    fs(s, msg, 64, 0)
                    fr(r, buf, 64, 0)

            def try_recv_empty(n: int) -> None:
                f = rx.try_recv
                for _ in range(n):
                    f()

            def pair(n: int) -> None:
                fs, fr = tx.send, rx.recv
                for _ in range(n):
                    fs(msg)
                    fr()

            def zero_copy_pair(n: int) -> None:
                for _ in range(n):
                    with tx.loan(64) as loan:
                        loan.view[:8] = b"12345678"
                    with rx.read() as got:
                        got.view[0]

            out["empty_loop_ns"] = per_call_ns(loop)
            out["cffi_sender_index_ns"] = per_call_ns(raw_index)
            out["cffi_recv_empty_ns"] = per_call_ns(raw_recv_empty)
            out["cffi_send_recv_pair_ns"] = per_call_ns(raw_pair)
            out["try_recv_empty_ns"] = per_call_ns(try_recv_empty)
            out["send_recv_pair_ns"] = per_call_ns(pair)
            out["loan_publish_read_release_ns"] = per_call_ns(zero_copy_pair, 30_000)
            zimp.Heap.create(name, 1 << 20)
            with zimp.Heap(name) as heap:
                handle = heap.alloc(64).handle

                def heap_alloc_release(n: int) -> None:
                    alloc = heap.alloc
                    for _ in range(n):
                        alloc(64).release()

                def heap_resolve_release(n: int) -> None:
                    resolve = heap.resolve
                    for _ in range(n):
                        resolve(handle).release()
                out["heap_alloc_release_ns"] = per_call_ns(heap_alloc_release, 30_000)
                out["heap_resolve_release_ns"] = per_call_ns(heap_resolve_release, 30_000)
            zimp.Heap.unlink(name)
            sp = int(ffi.cast("uintptr_t", s))
            for kind in (ctypes.CDLL, ctypes.PyDLL):
                f = kind(LIBRARY).zimp_sender_index
                f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_int

                def ct(n: int, f=f) -> None:
                    for _ in range(n):
                        f(sp)
                out[f"ctypes_{kind.__name__}_sender_index_ns"] = per_call_ns(ct)
    out["gil_release_ns"] = out["ctypes_CDLL_sender_index_ns"] - out["ctypes_PyDLL_sender_index_ns"]
    out["loadavg"] = list(os.getloadavg())
    return out


def find_c() -> str | None:
    """pingpong_c in the checkout's build folders (`build` first)."""
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "python", "pingpong_c")),
                   key=lambda p: (os.path.basename(os.path.dirname(os.path.dirname(p)))
                                  != "build", -os.path.getmtime(p)))
    return found[0] if found else None


def run_json(cmd: list[str], env: dict | None = None) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                         timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="busy,block")
    ap.add_argument("--cffi", default="api,abi", help="cffi modes to measure")
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--c", default=None, help="the pingpong_c program")
    ap.add_argument("--one", choices=["busy", "block", "adaptive"])
    ap.add_argument("--calls", action="store_true")
    ap.add_argument("--json", help="write every run's record to this file")
    ap.add_argument("--cpus", help="PING,ECHO: pin the two processes to these CPUs")
    a = ap.parse_args()
    cpus = tuple(int(c) for c in a.cpus.split(",")) if a.cpus else None
    pin_args = ["--cpus", a.cpus] if a.cpus else []
    if a.one:
        print(json.dumps(one(a.one, a.rounds, cpus)))
        return
    if a.calls:
        print(json.dumps(calls()))
        return

    cprog = a.c or find_c()
    modes, cffis = a.modes.split(","), a.cffi.split(",")
    me = [sys.executable, os.path.abspath(__file__)]
    runs: list[dict] = []
    call_runs: list[dict] = []
    for rep in range(a.repeat):
        for mode in modes:
            for cf in cffis:
                env = {**os.environ, "ZIMP_CFFI": cf}
                if cf == "abi":
                    env.pop("ZIMP_CFFI_MODULE", None)
                rec = run_json(me + ["--one", mode, "--rounds", str(a.rounds)] + pin_args,
                               env)
                if rec["cffi"] != cf:
                    sys.exit(f"asked for cffi {cf} mode, got {rec['cffi']}: build the "
                             "compiled module (pip install, or the CMake build's "
                             "ZIMP_CFFI_MODULE)")
                runs.append({**rec, "rep": rep})
            if cprog:
                runs.append({**run_json([cprog, "--mode", mode, "--rounds", str(a.rounds)]
                                        + pin_args), "rep": rep, "cffi": "-"})
        for cf in cffis:
            env = {**os.environ, "ZIMP_CFFI": cf}
            if cf == "abi":
                env.pop("ZIMP_CFFI_MODULE", None)
            call_runs.append({**run_json(me + ["--calls"], env), "rep": rep})
        print(f"repeat {rep + 1}/{a.repeat} done, load {os.getloadavg()[0]:.2f}",
              file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pingpong": runs, "calls": call_runs}, f, indent=1)

    med = statistics.median
    print(f"\n64 B ping-pong, {a.rounds} round trips per run, {a.repeat} repeats; one-way "
          "latency = round trip / 2, us (median over repeats of each run's p50 / p99)\n")
    print("| mode | impl | cffi | one-way p50 | one-way p99 | runs' p50 range | load (1 min) |")
    print("|---|---|---|---|---|---|---|")
    for mode in modes:
        for impl, cf in [("python", c) for c in cffis] + [("c", "-")]:
            rs = [r for r in runs if r["mode"] == mode and r["impl"] == impl and r["cffi"] == cf]
            if not rs:
                continue
            p50s = [r["one_way_p50_us"] for r in rs]
            loads = [r["loadavg"][0] for r in rs]
            print(f"| {mode} | {impl} | {cf} | {med(p50s):.2f} | "
                  f"{med(r['one_way_p99_us'] for r in rs):.2f} | "
                  f"{min(p50s):.2f}-{max(p50s):.2f} | {min(loads):.2f}-{max(loads):.2f} |")
    print("\nPython / C one-way p50 within each repeat (the same minute), per repeat and "
          "the median\n")
    print("| mode | cffi | " + " | ".join(f"rep {i + 1}" for i in range(a.repeat))
          + " | median |")
    print("|---|---|" + "---|" * (a.repeat + 1))
    for mode in modes:
        for cf in cffis:
            ratios = []
            for rep in range(a.repeat):
                py = [r for r in runs if r["rep"] == rep and r["mode"] == mode
                      and r["impl"] == "python" and r["cffi"] == cf]
                c = [r for r in runs if r["rep"] == rep and r["mode"] == mode
                     and r["impl"] == "c"]
                if py and c:
                    ratios.append(py[0]["one_way_p50_us"] / c[0]["one_way_p50_us"])
            if ratios:
                print(f"| {mode} | {cf} | " + " | ".join(f"{x:.2f}" for x in ratios)
                      + f" | {med(ratios):.2f} |")
    c_calls = [r for r in runs if r["impl"] == "c"]
    print("\nsingle calls in one process, ns (median over repeats of each run's median "
          "of 5 loops)\n")
    print("| call | " + " | ".join(f"python, cffi {cf}" for cf in cffis) + " | C |")
    print("|---|" + "---|" * (len(cffis) + 1))
    rows = [("empty Python loop iteration", "empty_loop_ns", None),
            ("zimp_sender_index (raw cffi call)", "cffi_sender_index_ns", "sender_index_ns"),
            ("zimp_recv, empty channel (raw cffi call)", "cffi_recv_empty_ns", "recv_empty_ns"),
            ("zimp_send + zimp_recv (raw cffi calls)", "cffi_send_recv_pair_ns",
             "send_recv_pair_ns"),
            ("Receiver.try_recv, empty channel", "try_recv_empty_ns", "recv_empty_ns"),
            ("Sender.send + Receiver.recv", "send_recv_pair_ns", "send_recv_pair_ns"),
            ("loan, write 8 B, publish + read, release", "loan_publish_read_release_ns", None),
            ("Heap.alloc + Block.release", "heap_alloc_release_ns", None),
            ("Heap.resolve(handle bytes) + Block.release", "heap_resolve_release_ns", None),
            ("ctypes call, GIL released (CDLL)", "ctypes_CDLL_sender_index_ns", None),
            ("ctypes call, GIL kept (PyDLL)", "ctypes_PyDLL_sender_index_ns", None),
            ("GIL release + reacquire (difference)", "gil_release_ns", None)]
    for label, key, ckey in rows:
        cval = f"{med(r[ckey] for r in c_calls):.0f}" if ckey and c_calls else ""
        print(f"| {label} | " + " | ".join(
            f"{med(r[key] for r in call_runs if r['cffi'] == cf):.0f}" for cf in cffis)
              + f" | {cval} |")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
