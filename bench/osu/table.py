#!/usr/bin/env python3
"""Table and goals of a scripts/mpi_bench.sh run: python3 table.py RESULTS_DIR.

Reads RESULTS_DIR/raw.csv (one line per repeat, implementation, test, ranks
and size), prints every size with the median over repeats of each
implementation's value and the median over repeats of the per-repeat ratios
zimp/Open MPI and zimp/MPICH (both measured in the same repeat), checks the
four goals of the MPI layer (docs/mpi_bench.md), and writes RESULTS_DIR/summary.csv.
"""
import csv
import statistics
import sys

IMPLS = ("zimp", "openmpi", "mpich")
TESTS = ("lat", "bw", "bcast", "barrier", "allreduce", "gather")


def num(s):
    try:
        v = float(s)
        return v if v == v else None
    except ValueError:
        return None


def load(path):
    vals = {}      # (test, np, size) -> impl -> repeat -> value
    status = {}    # (test, np, size) -> impl -> why there is no value
    blanket = {}   # (impl, test, np) -> status for sizes a run never printed
    units = {}
    sizes = {}     # (test, np) -> set of sizes
    with open(path) as f:
        for row in csv.DictReader(f):
            key3 = (row["impl"], row["test"], int(row["np"]))
            if row["size"] == "*":
                blanket.setdefault(key3, row["status"])
                continue
            k = (row["test"], int(row["np"]), int(row["size"]))
            sizes.setdefault(k[:2], set()).add(k[2])
            if row["unit"]:
                units[row["test"]] = row["unit"]
            v = num(row["value"])
            if row["status"] == "ok" and v is not None:
                vals.setdefault(k, {}).setdefault(row["impl"], {})[int(row["repeat"])] = v
            else:
                status.setdefault(k, {})[row["impl"]] = row["status"]
    return vals, status, blanket, units, sizes


def fmt(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def ratio_median(a, b):
    """Median over repeats of a[r] / b[r], for the repeats where both ran."""
    rs = [a[r] / b[r] for r in a if r in b and b[r] > 0]
    return statistics.median(rs) if rs else None


def main():
    out = sys.argv[1]
    vals, status, blanket, units, sizes = load(out + "/raw.csv")

    def why(impl, k):
        return status.get(k, {}).get(impl) or blanket.get((impl, k[0], k[1])) or "n/a"

    def cell(impl, k):
        per = vals.get(k, {}).get(impl)
        return statistics.median(per.values()) if per else None

    lines, summary = [], []
    lines.append("Medians over repeats. Ratios: median over repeats of zimp / other in the same repeat.")
    lines.append("us (lat, bcast, barrier, allreduce, gather): lower is better, ratio < 1 = zimp faster;")
    lines.append("MB/s (bw): higher is better, ratio > 1 = zimp faster.")
    lines.append("")
    hdr = "%-9s %2s %8s %5s %10s %10s %10s %10s %10s" % (
        "test", "np", "size", "unit", "zimp", "openmpi", "mpich", "z/ompi", "z/mpich")
    notes = {}
    for test in TESTS:
        for np in sorted({n for (t, n) in sizes if t == test}):
            lines.append(hdr)
            for size in sorted(sizes[(test, np)]):
                k = (test, np, size)
                row = [cell(i, k) for i in IMPLS]
                texts = []
                for i, v in zip(IMPLS, row):
                    if v is not None:
                        texts.append(fmt(v))
                    else:
                        w = why(i, k)
                        mark = notes.setdefault(w, "[%d]" % (len(notes) + 1))
                        texts.append("n/a" + mark)
                z = vals.get(k, {}).get("zimp", {})
                ro = ratio_median(z, vals.get(k, {}).get("openmpi", {}))
                rm = ratio_median(z, vals.get(k, {}).get("mpich", {}))
                lines.append("%-9s %2d %8d %5s %10s %10s %10s %10s %10s" % (
                    test, np, size, units.get(test, ""), *texts,
                    "-" if ro is None else "%.2f" % ro, "-" if rm is None else "%.2f" % rm))
                summary.append([test, np, size, units.get(test, "")] +
                               ["" if v is None else "%.4g" % v for v in row] +
                               ["" if ro is None else "%.3f" % ro, "" if rm is None else "%.3f" % rm])
            lines.append("")
    for w, mark in notes.items():
        lines.append("%s %s" % (mark, w))
    lines.append("")

    # ---- the goals (docs/mpi_bench.md) ----
    def best_ratio(k, higher_better):
        """Median over repeats of zimp / (the better of the two others in that repeat)."""
        z = vals.get(k, {}).get("zimp", {})
        o = vals.get(k, {}).get("openmpi", {})
        m = vals.get(k, {}).get("mpich", {})
        rs = []
        for r, zv in z.items():
            others = [d[r] for d in (o, m) if r in d]
            if others:
                rs.append(zv / (max(others) if higher_better else min(others)))
        return statistics.median(rs) if rs else None

    goals = []
    k = ("lat", 2, 64)
    r = best_ratio(k, False)
    goals.append(("latency 64 B, 2 ranks: zimp <= 1.0x the better of Open MPI and MPICH (stretch 0.8x)",
                  r is not None and r <= 1.0,
                  "n/a" if r is None else "%.2fx%s" % (r, " (stretch met)" if r <= 0.8 else "")))
    bad, shown = [], []
    bsizes = sorted(sizes.get(("bcast", 4), []))
    for size in bsizes:
        k = ("bcast", 4, size)
        z = vals.get(k, {}).get("zimp", {})
        for other in ("openmpi", "mpich"):
            o = vals.get(k, {}).get(other, {})
            if not z:
                bad.append("%d B: zimp n/a" % size)
            elif not o:
                continue              # the other did not finish: zimp is faster by default
            else:
                rr = ratio_median(z, o)
                if rr is None or rr >= 1.0:
                    bad.append("%d B vs %s %.2fx" % (size, other, rr if rr is not None else float("nan")))
    goals.append(("bcast, 4 ranks: zimp faster than both at every size",
                  bool(bsizes) and not bad,
                  ("slower at: " + "; ".join(bad)) if bad else "%d sizes, all faster" % len(bsizes)))
    k = ("barrier", 4, 0)
    r = ratio_median(vals.get(k, {}).get("zimp", {}), vals.get(k, {}).get("openmpi", {}))
    goals.append(("barrier, 4 ranks on %s cores: zimp <= 0.5x Open MPI" % "2",
                  r is not None and r <= 0.5, "n/a" if r is None else "%.2fx" % r))
    k = ("bw", 2, 1048576)
    r = best_ratio(k, True)
    goals.append(("bandwidth 1 MiB, 2 ranks: zimp >= the better of Open MPI and MPICH",
                  r is not None and r >= 1.0, "n/a" if r is None else "%.2fx" % r))
    lines.append("Goals:")
    for text, ok, detail in goals:
        lines.append("  %-6s %s: %s" % ("MET" if ok else "MISSED", text, detail))
    print("\n".join(lines))

    with open(out + "/summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "np", "size", "unit", "zimp", "openmpi", "mpich",
                    "zimp_over_openmpi", "zimp_over_mpich"])
        w.writerows(summary)


if __name__ == "__main__":
    main()
