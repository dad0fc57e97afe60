#!/usr/bin/env python3
"""Plots of a zimp_bench results folder, in the style of the ZIMP report's
Figures 2-6: throughput per receiver vs message size for N=1 and the largest
N; zimp's speed-up over each mechanism vs N (1 B, 1 MiB); zimp over
Barrelfish MP vs N (128 B); and the quick comparisons.

    python3 bench/plot.py bench/results/<run>
"""
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(folder):
    with open(os.path.join(folder, "summary.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("nrecv", "size", "ok", "reps", "pinned"):
            r[k] = int(r[k])
        for k in ("msgs_per_s", "mb_per_s", "speedup_vs_pipe", "p50_ns", "p99_ns", "probe_ns"):
            try:
                r[k] = float(r[k])
            except ValueError:
                r[k] = math.nan
    meta = {}
    try:
        with open(os.path.join(folder, "results.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        pass
    return rows, meta


def raw_ratio(folder, a, b, n, size):
    """Median over repeats of msgs/s(a) / msgs/s(b) measured in the same repeat."""
    by = {}
    with open(os.path.join(folder, "raw.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["group"] != "micro" or r["kind"] != "stream" or r["status"] != "ok":
                continue
            if int(r["nrecv"]) != n or int(r["size"]) != size or r["mech"] not in (a, b):
                continue
            by.setdefault(r["rep"], {})[r["mech"]] = float(r["msgs_per_s"])
    v = sorted(d[a] / d[b] for d in by.values() if a in d and b in d and d[b] > 0)
    if not v:
        return math.nan
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


def human(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return "%dMiB" % (size >> 20)
    if size >= 1024 and size % 1024 == 0:
        return "%dKiB" % (size >> 10)
    return "%dB" % size


STYLE = {}
MARKERS = "os^vD<>phx*+1234"


def style(mech):
    if mech not in STYLE:
        i = len(STYLE)
        STYLE[mech] = dict(marker=MARKERS[i % len(MARKERS)], color=plt.cm.tab20(i % 20),
                           linewidth=2.5 if mech.startswith("zimp") else 1.2)
    return STYLE[mech]


def subtitle(meta):
    m = meta.get("machine", {})
    p = meta.get("probe_ns", {})
    level = {"application": "application level: every byte written and verified",
             "transfer-only": "TRANSFER COST ONLY: 16 bytes written and checked per message"}
    return "%s cores, %s, Linux %s; probe median %s ns; %s mode, %s repeats\n%s" % (
        m.get("nproc", "?"), m.get("cpu_model", "?"), m.get("kernel", "?"),
        "%.0f" % p["median"] if p.get("median") is not None else "?",
        meta.get("mode", "?"), meta.get("repeats", "?"),
        level.get(meta.get("level"), "transfer cost only (before the level was recorded)"))


def throughput_vs_size(rows, meta, n, path, ncpu):
    micro = [r for r in rows if r["group"] == "micro" and r["kind"] == "stream" and r["nrecv"] == n]
    mechs = []
    for r in micro:
        if r["mech"] not in mechs:
            mechs.append(r["mech"])
    fig, ax = plt.subplots(figsize=(10, 6))
    for mech in mechs:
        pts = sorted((r["size"], r["msgs_per_s"]) for r in micro
                     if r["mech"] == mech and r["ok"] > 0 and r["size"] > 0)
        if not pts:
            continue
        label = next(r["label"] for r in micro if r["mech"] == mech)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style(mech))
    over = n + 1 > ncpu
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["size"] for r in micro if r["size"] > 0})
    ax.set_xticks(sizes)
    ax.set_xticklabels([human(s) for s in sizes])
    ax.set_xlabel("message size")
    ax.set_ylabel("messages/s delivered per receiver")
    ax.set_title("1 sender -> %d receiver%s%s\n%s" % (
        n, "s" if n > 1 else "", " (oversubscribed: %d processes on %d cores)" % (n + 1, ncpu)
        if over else " (one process per core)", subtitle(meta)), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def speedup_vs_n(folder, rows, meta, size, path, only=None):
    micro = [r for r in rows if r["group"] == "micro" and r["kind"] == "stream"]
    ns = sorted({r["nrecv"] for r in micro})
    mechs = []
    for r in micro:
        if r["mech"] not in mechs and r["mech"] != "zimp" and (only is None or r["mech"] in only):
            mechs.append(r["mech"])
    fig, ax = plt.subplots(figsize=(9, 5.5))
    drawn = 0
    for mech in mechs:
        pts = [(n, raw_ratio(folder, "zimp", mech, n, size)) for n in ns]
        pts = [p for p in pts if not math.isnan(p[1])]
        if not pts:
            continue
        label = next(r["label"] for r in micro if r["mech"] == mech)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style(mech))
        drawn += 1
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.set_xlabel("receivers N (processes beyond the core count are oversubscribed)")
    ax.set_ylabel("zimp throughput / mechanism throughput (x)")
    ax.set_title("Speed-up of zimp, %s messages\n%s" % (human(size), subtitle(meta)), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def external(mech):
    """MPI and iceoryx2 peers: separate programs, measured in the micro phase."""
    return mech.startswith(("openmpi", "mpich", "iceoryx2"))


def compare(rows, meta, path):
    def pick(r, kind):
        if r["kind"] != kind or r["ok"] <= 0 or r["size"] != 64:
            return False
        if r["group"] == "compare":
            return True
        return r["group"] == "micro" and external(r["mech"])

    # The peers' rows come from the micro phase of the same run (marked *).
    def marked(r):
        return dict(r, label=r["label"] + (" *" if r["group"] == "micro" else ""))

    lat = [marked(r) for r in rows if pick(r, "pingpong")]
    thr = [marked(r) for r in rows if pick(r, "stream") and r["nrecv"] == 4]
    if not lat and not thr:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.5))
    lat.sort(key=lambda r: r["p50_ns"])
    a1.barh([r["label"] for r in lat], [r["p50_ns"] for r in lat], color="tab:blue", label="p50")
    a1.barh([r["label"] for r in lat], [r["p99_ns"] - r["p50_ns"] for r in lat],
            left=[r["p50_ns"] for r in lat], color="tab:orange", alpha=0.6, label="p99")
    a1.set_xscale("log")
    a1.set_xlim(left=10)
    a1.set_xlabel("one-way latency, 64 B, ns (ping-pong / 2)")
    a1.legend(fontsize=8)
    a1.tick_params(axis="y", labelsize=7)
    thr.sort(key=lambda r: r["msgs_per_s"])
    a2.barh([r["label"] for r in thr], [r["msgs_per_s"] for r in thr], color="tab:green")
    a2.set_xscale("log")
    a2.set_xlim(left=1000)
    a2.set_xlabel("1 -> 4 receivers, 64 B: messages/s per receiver")
    a2.tick_params(axis="y", labelsize=7)
    fig.suptitle("Quick comparisons (same run; * = external peer, from the micro phase)\n"
                 + subtitle(meta), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    rows, meta = load(folder)
    ncpu = meta.get("machine", {}).get("nproc", os.cpu_count() or 1)
    ns = sorted({r["nrecv"] for r in rows if r["group"] == "micro" and r["kind"] == "stream"})
    out = []
    if ns:
        for n in (ns[0], ns[-1]) if len(ns) > 1 else (ns[0],):
            p = os.path.join(folder, "throughput_N%d.png" % n)
            throughput_vs_size(rows, meta, n, p, ncpu)
            out.append(p)
        for size, name in ((1, "speedup_1B.png"), (1 << 20, "speedup_1MiB.png")):
            p = os.path.join(folder, name)
            speedup_vs_n(folder, rows, meta, size, p)
            out.append(p)
        p = os.path.join(folder, "speedup_bmp_128B.png")
        speedup_vs_n(folder, rows, meta, 128, p, only={"bmp"})
        out.append(p)
    p = os.path.join(folder, "compare.png")
    compare(rows, meta, p)
    if os.path.exists(p):
        out.append(p)
    for p in out:
        print("plot:", p)


if __name__ == "__main__":
    main()
