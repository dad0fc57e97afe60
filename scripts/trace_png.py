#!/usr/bin/env python3
"""Renders a zimp trace exported as Chrome/Perfetto JSON to a PNG timeline.

    zimp trace export zimp-trace --out trace.json
    python3 scripts/trace_png.py trace.json trace.png [--title TEXT]

One lane per traced thread (process and thread id); instants (open, send,
recv, error, ...) are markers, sleeps and spins are bars. Needs matplotlib.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {  # event name: (marker, colour)
    "start": ("|", "black"), "stop": ("|", "black"),
    "create": ("D", "tab:olive"), "unlink": ("D", "tab:gray"),
    "open": (">", "tab:green"), "close": ("<", "tab:green"),
    "send": ("^", "tab:blue"), "recv": ("v", "tab:orange"),
    "error": ("X", "tab:red"), "crash": ("*", "darkred"),
    "stall": ("s", "tab:purple"), "evict": ("P", "tab:purple"),
    "wake": ("o", "tab:cyan"), "mark": ("d", "tab:brown"), "flush": (".", "tab:gray"),
}
BARS = {"sleep": "tab:cyan", "spin": "tab:pink"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    with open(a.json) as f:
        events = json.load(f)["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
    lanes = sorted({(e["pid"], e["tid"]) for e in events if e.get("ph") in ("i", "X")})
    if not lanes:
        sys.exit("trace_png: no events in " + a.json)
    lane_of = {k: i for i, k in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.6 * len(lanes)))
    seen = set()
    for e in events:
        ph, name = e.get("ph"), e["name"]
        if ph not in ("i", "X"):
            continue
        y = lane_of[(e["pid"], e["tid"])]
        t = e["ts"] / 1000.0  # ms
        if ph == "X":
            ax.broken_barh([(t, max(e.get("dur", 0) / 1000.0, 1e-3))], (y - 0.3, 0.6),
                           color=BARS.get(name, "lightgray"), alpha=0.6,
                           label=None if name in seen else name)
        else:
            m, c = STYLE.get(name, ("o", "black"))
            small = name in ("wake", "flush")  # frequent: drawn small, under the rest
            ax.plot([t], [y + (0.22 if small else 0)], marker=m, color=c, linestyle="none",
                    markersize=4 if small else 8, zorder=2 if small else 3,
                    label=None if name in seen else name)
        seen.add(name)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{names.get(p, p)}\nthread {t}" for p, t in lanes], fontsize=8)
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    ax.set_xlabel("time (ms from the first event)")
    ax.set_title(a.title or f"zimp trace: {a.json}")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
