"""Runs the pipeline over every transport and writes the comparison.

    python3 bench.py [--out DIR] [--quick] [--repeat R] [--transports zimp,queue,...]
                     [--modes 0,1,2]

Modes: communication only at the transfer-cost level (8 bytes stamped per frame), the
same with one reader and three detectors (1->3), communication only with a whole frame
copied in (a stand-in for decoding), detection on (decode + Haar + draw + MP4), and the
1->3 variant with detection on. Every (mode, transport) runs R times, the repeats
outermost so that each transport sees the same machine; the table gives medians over
the repeats, and the ratios to multiprocessing.Queue, to the careful shared_memory
version (shm) and to the Queue-indexed one (shm-queue). Writes results.json (every run),
table.md and plot.png in DIR, with the load averages. --modes picks modes by their
index in MODES (0-2: communication only).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline  # noqa: E402

MODES = [  # (label, extra args, frames, quick frames): runs of 0.1 s and more
    ("comm only, 8 B stamped", ["--detect", "off", "--fill", "stamp"], 10000, 2000),
    ("comm only, 8 B stamped, 1->3", ["--detect", "off", "--fill", "stamp",
                                      "--detectors", "3"], 5000, 1000),
    ("comm only, frame copied in", ["--detect", "off", "--fill", "copy"], 2000, 400),
    ("detection on", [], 60, 24),
    ("detection on, 1->3", ["--detectors", "3"], 30, 12),
]


PICKLING = ("queue", "pipe", "unix")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--transports", default=",".join(pipeline.TRANSPORTS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default=",".join(str(i) for i in range(len(MODES))),
                    help="indices into MODES")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    modes = [MODES[int(i)] for i in a.modes.split(",")]
    rows = []
    for rep in range(a.repeat):
        for label, extra, frames, quick in modes:
            for t in a.transports.split(","):
                n = quick if a.quick else frames
                if t in PICKLING and "--detect" in extra:
                    n //= 10         # 100x slower: a tenth of the frames is still > 1 s
                args = ["--transport", t, "--frames", str(n), "--out",
                        os.path.join(a.out, "media")]
                res = pipeline.main(args + extra)
                res["mode"], res["rep"] = label, rep
                rows.append(res)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    write_table(rows, os.path.join(a.out, "table.md"))
    write_plot(rows, os.path.join(a.out, "plot.png"))
    keep_contact_sheets(os.path.join(a.out, "media"), a.out)


def keep_contact_sheets(media: str, out: str) -> None:
    """Keeps the zimp runs' contact sheets, removes the videos (megabytes per run)."""
    import shutil
    for src, dst in (("zimp-1-contact.png", "contact.png"),
                     ("zimp-slot-3-contact.png", "contact-1to3.png")):
        if os.path.exists(os.path.join(media, src)):
            shutil.copy(os.path.join(media, src), os.path.join(out, dst))
    shutil.rmtree(media, ignore_errors=True)


def medians(rows: list[dict]) -> list[dict]:
    """One row per (mode, transport): medians over the repeats, the load range."""
    out = []
    for key in dict.fromkeys((r["mode"], r["transport"]) for r in rows):
        rs = [r for r in rows if (r["mode"], r["transport"]) == key]
        fps = [r["fps"] for r in rs]
        out.append({**rs[0], "fps": statistics.median(fps), "fps_min": min(fps),
                    "fps_max": max(fps), "runs": len(rs),
                    "comm_cpu_us_per_frame": statistics.median(
                        r["comm_cpu_us_per_frame"] for r in rs),
                    "load_min": min(r["loadavg"][0] for r in rs),
                    "load_max": max(r["loadavg"][0] for r in rs)})
    return out


def write_table(rows: list[dict], path: str) -> None:
    """Markdown: frames/s, ratio to Queue and shm, comm CPU per frame, bytes copied."""
    lines = ["| mode | transport | frames/s | (min-max) | x Queue | x shm | x shm-queue | "
             "comm CPU us/frame | comm CPU vs Queue | frame bytes copied | load (1 min) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    med = medians(rows)
    for mode in dict.fromkeys(r["mode"] for r in med):
        rs = [r for r in med if r["mode"] == mode]
        q = next((r for r in rs if r["transport"] == "queue"), None)
        s = next((r for r in rs if r["transport"] == "shm"), None)
        sq = next((r for r in rs if r["transport"] == "shm-queue"), None)
        for r in rs:
            lines.append(
                f"| {mode} | {r['transport']} | {r['fps']:.0f} | "
                f"{r['fps_min']:.0f}-{r['fps_max']:.0f} | "
                + (f"{r['fps'] / q['fps']:.2f} | " if q else "| ")
                + (f"{r['fps'] / s['fps']:.2f} | " if s else "| ")
                + (f"{r['fps'] / sq['fps']:.2f} | " if sq else "| ")
                + f"{r['comm_cpu_us_per_frame']:.0f} | "
                + (f"{r['comm_cpu_us_per_frame'] / q['comm_cpu_us_per_frame'] * 100:.1f} % | "
                   if q else "| ")
                + f"{r['copied_bytes_per_frame']:,} | "
                f"{r['load_min']:.2f}-{r['load_max']:.2f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_plot(rows: list[dict], path: str) -> None:
    """Bars of frames/s per transport, one panel per mode (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = medians(rows)
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(4 * len(modes), 3.6), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        rs = [r for r in rows if r["mode"] == mode]
        ax.bar([r["transport"] for r in rs], [r["fps"] for r in rs],
               color=["tab:green" if r["transport"].startswith("zimp") else "tab:gray" for r in rs])
        ax.set_yscale("log")
        ax.set_ylim(bottom=1)            # the same floor everywhere: bars compare by height
        ax.set_title(mode, fontsize=9)
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        ax.set_ylabel("frames/s (end to end)")
    fig.suptitle("face pipeline 640x480 BGR, 2-core VM under load", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
