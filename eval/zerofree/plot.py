#!/usr/bin/env python3
"""Plots of the zeroing evaluation (after the paper's Figures 3 and 5).
  plot.py RESULTS_DIR   reads runs.csv, ckpt.json; writes overhead.png, ckpt.png"""
import csv, json, os, sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

d = sys.argv[1]
runs = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
ckpt = json.load(open(os.path.join(d, "ckpt.json")))
apps = list(ckpt.keys())
timed = [m for m in ["none", "glibc0", "eager", "pages", "lazy", "trim"]
         if any(r["mode"] == m for r in runs)]


def quart(xs):
    s = sorted(xs)
    q = lambda f: s[min(len(s) - 1, int(round(f * (len(s) - 1))))]
    return q(0.25), q(0.5), q(0.75)


# Figure 3 analogue: CPU time normalised to the median of no preload.
fig, axes = plt.subplots(1, len(apps), figsize=(4 * len(apps), 3.6), squeeze=False)
for ax, app in zip(axes[0], apps):
    base = quart([float(r["cpu_s"]) for r in runs if r["app"] == app and r["mode"] == "none"])[1]
    for i, m in enumerate(timed):
        xs = [float(r["cpu_s"]) / base for r in runs if r["app"] == app and r["mode"] == m]
        lo, med, hi = quart(xs)
        ax.bar(i, med, color="C%d" % i)
        ax.errorbar(i, med, yerr=[[med - lo], [hi - med]], color="k", capsize=3)
        ax.text(i, hi + 0.01, "%+.1f%%" % (100 * (med - 1)), ha="center", fontsize=8)
    ax.set_xticks(range(len(timed)))
    ax.set_xticklabels(timed, rotation=30)
    ax.set_ylim(0.8, max(1.3, ax.get_ylim()[1]))
    ax.axhline(1, color="gray", lw=0.5)
    ax.set_title(app)
    ax.set_ylabel("CPU time / median without preload")
fig.suptitle("Runtime overhead (median, quartiles)")
fig.tight_layout()
fig.savefig(os.path.join(d, "overhead.png"), dpi=110)

# Figure 5 analogue: checkpoint size normalised to no preload, no compression.
modes = [m for m in ["none", "glibc0", "eager", "eager-trim", "pages", "lazy", "trim"]
         if m in ckpt[apps[0]]]
fig, axes = plt.subplots(1, len(apps), figsize=(4.6 * len(apps), 3.8), squeeze=False)
for ax, app in zip(axes[0], apps):
    base = ckpt[app]["none"]["total"]["nonzero_bytes"]
    w = 0.38
    for i, m in enumerate(modes):
        t = ckpt[app][m]["total"]
        raw = t["nonzero_bytes"] / base
        comp = t["compressed"]["zstd-3"] / base
        ax.bar(i - w / 2, raw, w, color="C0", label="zero pages skipped" if i == 0 else None)
        ax.bar(i + w / 2, comp, w, color="C1", label="+ zstd-3" if i == 0 else None)
        ax.text(i - w / 2, raw + 0.02, "%.1f" % (t["nonzero_bytes"] / 2**20), ha="center", fontsize=7)
        ax.text(i + w / 2, comp + 0.02, "%.1f" % (t["compressed"]["zstd-3"] / 2**20), ha="center", fontsize=7)
        ax.text(i - w / 2, 0.03, str(t["zero_pages"]), ha="center", fontsize=6, rotation=90, color="w")
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=30)
    ax.set_title(app)
    ax.set_ylabel("size / no preload, uncompressed")
    ax.legend(fontsize=7)
fig.suptitle("Checkpoint size (MiB above bars; zero pages inside)")
fig.tight_layout()
fig.savefig(os.path.join(d, "ckpt.png"), dpi=110)
print("wrote", os.path.join(d, "overhead.png"), os.path.join(d, "ckpt.png"))
