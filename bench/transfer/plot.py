#!/usr/bin/env python3
"""Plots of a zimp_transfer results folder, after the SMP data-transfer
study's Figures 2-4 (and a bar chart for its Table IV):
fig2_copy.png, fig3_chunk.png, fig4_bandwidth.png (one destination),
fig4_fanout.png (one to N), latency_zerocopy.png (time until the message is
in every destination's hands, against size), table4_disturb.png.

    python3 bench/transfer/plot.py bench/results/<run>
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1048576.0


def rows(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        x = float(v)
    except ValueError:
        return None
    return None if x != x else x


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human(s) for s in sizes], rotation=45, ha="right")
    ax.grid(True, which="major", alpha=0.3)


def fig2(folder):
    med = defaultdict(list)
    for r in rows(folder, "fig2_copy.csv"):
        for col, mode in (("copy_ns", 0), ("copy_touch_ns", 1)):
            ns = num(r[col])
            if ns:
                med[(r["routine"], mode, int(r["size"]))].append(int(r["size"]) / MIB / (ns * 1e-9))
    if not med:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for mode, ax, title in ((0, axes[0], "copy only"), (1, axes[1], "copy, then the consumer reads it")):
        for routine in sorted({k[0] for k in med}):
            pts = sorted((s, statistics.median(v)) for (r, m, s), v in med.items() if r == routine and m == mode)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=routine)
        size_axis(ax, sorted({k[2] for k in med}))
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("copy size")
    axes[0].set_ylabel("MiB/s (median)")
    axes[0].legend()
    fig.suptitle("Copy routines (after the study's Figure 2)")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "fig2_copy.png"), dpi=120)
    plt.close(fig)


def fig3(folder):
    med = defaultdict(list)
    for r in rows(folder, "fig3_chunk.csv"):
        bw = num(r["mib_s"])
        if bw and r["status"] == "ok" and r["chunk"] == r["chunk_asked"]:
            med[("%s, depth %s" % (r["mech"], r["depth_asked"]), int(r["chunk"]))].append(bw)
    if not med:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for series in sorted({k[0] for k in med}):
        pts = sorted((c, statistics.median(v)) for (s, c), v in med.items() if s == series)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=series)
    size_axis(ax, sorted({k[1] for k in med}))
    ax.set_xlabel("chunk (buffer / queue element) size")
    ax.set_ylabel("MiB/s for a 4 MiB transfer (median)")
    ax.set_title("Chunk size of the pipelined mechanisms (after the study's Figure 3)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "fig3_chunk.png"), dpi=120)
    plt.close(fig)


def fanout(r):
    return int(r.get("ndst") or 1)


def fig4(folder, many=False):
    med = defaultdict(list)
    ndst = 1
    for r in rows(folder, "transfer.csv"):
        ns = num(r["p50_ns"])     # mib_s is rounded to 0.1: recompute for tiny sizes
        if ns and r["status"] == "ok" and (fanout(r) > 1) == many:
            ndst = fanout(r)
            med[(r["mech"], int(r["size"]))].append(int(r["size"]) / MIB / (ns * 1e-9))
    if not med:
        return
    fig, ax = plt.subplots(figsize=(9, 5.5))
    order = []
    for r in rows(folder, "transfer.csv"):
        if r["mech"] not in order and any(k[0] == r["mech"] for k in med):
            order.append(r["mech"])
    for mech in order:
        pts = sorted((s, statistics.median(v)) for (m, s), v in med.items() if m == mech)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=mech,
                linewidth=2.5 if mech == "zimp-heap" else 1.2)
    size_axis(ax, sorted({k[1] for k in med}))
    ax.set_yscale("log")
    ax.set_xlabel("transfer size")
    if many:
        ax.set_ylabel("MiB/s of the message (median; every destination reads every byte)")
        ax.set_title("One to %d destinations: bandwidth vs size" % ndst)
    else:
        ax.set_ylabel("MiB/s (median over repeats; consumer reads every byte)")
        ax.set_title("Bandwidth vs size (after the study's Figure 4)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "fig4_fanout.png" if many else "fig4_bandwidth.png"), dpi=120)
    plt.close(fig)


def fig4_fanout(folder):
    fig4(folder, many=True)


def latency_zerocopy(folder):
    """The zero-copy path's time until every destination holds the message
    (before reading it), with and without the loan, against size."""
    med = defaultdict(list)
    for r in rows(folder, "transfer.csv"):
        if r["mech"] != "zimp-heap" or r["status"] != "ok":
            continue
        for col, what in (("deliver_ns", "with the loan"), ("handoff_ns", "from the publication")):
            ns = num(r.get(col, ""))
            if ns:
                med[("1->%d, %s" % (fanout(r), what), int(r["size"]))].append(ns / 1000)
    if not med:
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for series in sorted({k[0] for k in med}):
        pts = sorted((s, statistics.median(v)) for (m, s), v in med.items() if m == series)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=series)
    size_axis(ax, sorted({k[1] for k in med}))
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel("us until every destination holds it (median)")
    ax.set_title("zimp large messages: latency against size (zero-copy; slot path up to 4 KiB)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "latency_zerocopy.png"), dpi=120)
    plt.close(fig)


def table4(folder):
    walks = defaultdict(lambda: defaultdict(list))
    for r in rows(folder, "disturb.csv"):
        if r["status"] != "ok":
            continue
        for col in ("idle_ns", "after_ns", "evicted_ns"):
            walks[(r["mech"], r["role"])][col].append(float(r[col]))
    if not walks:
        return
    mechs = []
    for m, _ in walks:
        if m not in mechs:
            mechs.append(m)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.38
    for i, role in enumerate(("source", "destination")):
        ys = []
        for m in mechs:
            w = walks.get((m, role))
            ys.append(statistics.median(w["after_ns"]) / statistics.median(w["idle_ns"]) if w else 0)
        ax.bar([x + (i - 0.5) * width for x in range(len(mechs))], ys, width, label=role)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(mechs)))
    ax.set_xticklabels(mechs, rotation=30, ha="right")
    ax.set_ylabel("walk time after / without a transfer")
    ax.set_title("Working-set slowdown after a 4 MiB transfer (proxy for the study's Table IV)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "table4_disturb.png"), dpi=120)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for f in (fig2, fig3, fig4, fig4_fanout, latency_zerocopy, table4):
        f(sys.argv[1])


if __name__ == "__main__":
    main()
