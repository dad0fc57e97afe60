#!/usr/bin/env python3
"""Plots of a zimp_macro results folder, in the style of the ZIMP report's
Figures 7-9 and REICoM's Figures 2-4: PaxosInside throughput vs request
size, snapshot completion time vs nodes and vs checkpoint size, and zimp's
improvement over each mechanism.

    python3 macro/plot.py macro/results/<run>
"""
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fnum(s):
    try:
        return float(s)
    except ValueError:
        return math.nan


def load(folder):
    with open(os.path.join(folder, "macro.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["size"] = int(r["size"])
        r["nodes"] = int(r["nodes"])
        r["ok"] = int(r["reps_ok"])
        r["v"] = fnum(r["value"]) if r["ok"] else math.nan
        r["v2"] = fnum(r["value2"]) if r["ok"] else math.nan
    return rows


def size_label(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return "%dM" % (s >> 20)
    if s >= 1024 and s % 1024 == 0:
        return "%dK" % (s >> 10)
    return str(s)


MECH_ORDER = []


def style(m):
    if m == "zimp":
        return dict(lw=2.5, color="black", marker="o")
    if m not in MECH_ORDER:
        MECH_ORDER.append(m)
    return dict(lw=1, marker=".", color=plt.cm.tab20(MECH_ORDER.index(m) % 20))


def mechs_of(rows):
    out = []
    for r in rows:
        if r["mech"] not in out:
            out.append(r["mech"])
    return out


def series(rows, key, fixed):
    pts = sorted((r[key], r) for r in rows if all(r[k] == v for k, v in fixed.items()))
    return [p for p, _ in pts], [r for _, r in pts]


def improvement_bars(ax, rows, key, fixed, better_high, title, xlabel):
    ms = [m for m in mechs_of(rows) if m != "zimp"]
    xs, zr = series(rows, key, dict(fixed, mech="zimp"))
    width = 0.8 / max(1, len(ms))
    for j, m in enumerate(ms):
        _, mr = series(rows, key, dict(fixed, mech=m))
        ys = []
        for z, o in zip(zr, mr):
            if math.isnan(z["v"]) or math.isnan(o["v"]) or o["v"] == 0 or z["v"] == 0:
                ys.append(math.nan)
            elif better_high:
                ys.append((z["v"] / o["v"] - 1) * 100)
            else:
                ys.append((o["v"] / z["v"] - 1) * 100)
        ax.bar([i + j * width for i in range(len(xs))], ys, width, label=m,
               color=plt.cm.tab20(j % 20))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(xs))])
    ax.set_xticklabels([size_label(x) if key == "size" else str(x) for x in xs])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_yscale("symlog", linthresh=100)
    ax.set_ylim(bottom=-100)
    ax.set_ylabel("zimp's improvement (%)")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=6, ncol=4)
    ax.grid(axis="y", alpha=0.3)


def main(folder):
    rows = load(folder)
    px = [r for r in rows if r["proto"] == "paxos"]
    sn = [r for r in rows if r["proto"] == "snapshot"]
    made = []
    if px:
        fig, ax = plt.subplots(figsize=(8, 5))
        for m in mechs_of(px):
            xs, rs = series(px, "size", dict(mech=m))
            ax.plot(xs, [r["v"] for r in rs], label=m, **style(m))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted({r["size"] for r in px}))
        ax.set_xticklabels([size_label(s) for s in sorted({r["size"] for r in px})])
        ax.set_xlabel("request size (bytes)")
        ax.set_ylabel("decided values per second")
        ax.set_title("PaxosInside: throughput vs request size (1 leader, 1 acceptor, 3 learners)")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "paxos_throughput.png"), dpi=120)
        made.append("paxos_throughput.png")
        if "zimp" in mechs_of(px):
            fig, ax = plt.subplots(figsize=(9, 5))
            improvement_bars(ax, px, "size", {}, True,
                             "PaxosInside: zimp's throughput improvement over each mechanism",
                             "request size (bytes)")
            fig.tight_layout()
            fig.savefig(os.path.join(folder, "paxos_improvement.png"), dpi=120)
            made.append("paxos_improvement.png")
    if sn:
        ck = 4096
        nodes_pts = [r for r in sn if r["size"] == ck]
        ckn = max((r["nodes"] for r in sn if r["size"] != ck), default=None)
        size_pts = [r for r in sn if r["nodes"] == ckn] if ckn else []
        cores = os.cpu_count() or 2
        fig, axs = plt.subplots(1, 2, figsize=(13, 5))
        for m in mechs_of(sn):
            xs, rs = series(nodes_pts, "nodes", dict(mech=m))
            axs[0].plot(xs, [r["v"] for r in rs], label=m, **style(m))
            if size_pts:
                xs, rs = series(size_pts, "size", dict(mech=m))
                axs[1].plot(xs, [r["v"] for r in rs], label=m, **style(m))
        axs[0].axvspan(cores + 0.5, max(r["nodes"] for r in nodes_pts) + 0.5, color="grey", alpha=0.15,
                       label="oversubscribed (> %d cores)" % cores)
        axs[0].set_yscale("log")
        axs[0].set_xlabel("number of nodes (initiator included)")
        axs[0].set_ylabel("mean snapshot completion time (us)")
        axs[0].set_title("Snapshot: completion time vs nodes (4 KiB checkpoints)")
        axs[0].grid(alpha=0.3)
        axs[0].legend(fontsize=6, ncol=2)
        if size_pts:
            axs[1].set_xscale("log", base=2)
            axs[1].set_yscale("log")
            axs[1].set_xlabel("checkpoint size (bytes)")
            axs[1].set_title("Snapshot: completion time vs checkpoint size (%d nodes)" % ckn)
            axs[1].grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "snapshot_time.png"), dpi=120)
        made.append("snapshot_time.png")
        if "zimp" in mechs_of(sn):
            fig, axs = plt.subplots(1, 2, figsize=(14, 5))
            improvement_bars(axs[0], nodes_pts, "nodes", {}, False,
                             "Snapshot: zimp's completion-time improvement vs nodes (4 KiB)", "nodes")
            if size_pts:
                improvement_bars(axs[1], size_pts, "size", {}, False,
                                 "Snapshot: zimp's improvement vs checkpoint size (%d nodes)" % ckn,
                                 "checkpoint size (bytes)")
            fig.tight_layout()
            fig.savefig(os.path.join(folder, "snapshot_improvement.png"), dpi=120)
            made.append("snapshot_improvement.png")
    print("macro: plots: " + ", ".join(made))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
