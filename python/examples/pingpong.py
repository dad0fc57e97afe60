"""64-byte ping-pong between two Python processes over two zimp channels.

    python3 pingpong.py [--mode busy|block|adaptive] [--rounds 20000]

Prints the median and p99 one-way latency (half a round trip) in microseconds, and the
cost of one binding call (try_recv on an empty channel) for the per-call overhead.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time

import zimp

SPIN = {"busy": zimp.SPIN_BUSY, "block": zimp.SPIN_BLOCK, "adaptive": zimp.SPIN_ADAPTIVE}


def echo(name: str, mode: str, rounds: int) -> None:
    """Answers every ping with the same 64 bytes."""
    with zimp.Receiver(name + "-ping") as rx, zimp.Sender(name + "-pong") as tx:
        rx.set_spin(SPIN[mode])
        tx.set_spin(SPIN[mode])
        for _ in range(rounds):
            tx.send(rx.recv())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=list(SPIN), default="busy")
    ap.add_argument("--rounds", type=int, default=20000)
    a = ap.parse_args()
    name = f"pingpong-{os.getpid()}"
    with zimp.create(name + "-ping", slots=64, slot_size=64), \
            zimp.create(name + "-pong", slots=64, slot_size=64):
        p = mp.get_context("spawn").Process(target=echo, args=(name, a.mode, a.rounds))
        with zimp.Receiver(name + "-pong") as rx:
            p.start()
            while zimp.info(name + "-ping").receivers < 1:
                time.sleep(0.01)
            with zimp.Sender(name + "-ping") as tx:
                rx.set_spin(SPIN[a.mode])
                tx.set_spin(SPIN[a.mode])
                msg = bytes(64)
                rtts = []
                for _ in range(a.rounds):
                    t = time.perf_counter_ns()
                    tx.send(msg)
                    rx.recv()
                    rtts.append(time.perf_counter_ns() - t)
                with zimp.Receiver(name + "-ping") as idle:   # empty, our sender open
                    n = 100000
                    t = time.perf_counter_ns()
                    for _ in range(n):
                        idle.try_recv()
                    call_ns = (time.perf_counter_ns() - t) / n
            p.join(10)
    rtts.sort()
    print(json.dumps({"mode": a.mode, "rounds": a.rounds,
                      "one_way_p50_us": rtts[len(rtts) // 2] / 2e3,
                      "one_way_p99_us": rtts[int(len(rtts) * .99)] / 2e3,
                      "try_recv_call_ns": call_ns, "loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
