#!/usr/bin/env python3
"""Zeroing evaluation driver: runtime overhead and checkpoint size per mode.

For each application (synth, lammps, gromacs) and mode (none, glibc0, eager,
pages, lazy): --runs timed runs (user+sys CPU time and wall time, rounds
interleaved across modes), then one run stopped at a fixed point of the
computation and measured with zimp-ckpt (lazy: after the prepare signal).
Writes runs.csv, ckpt.json and summary.csv into --out.
"""
import argparse, csv, json, os, random, shutil, subprocess, sys, tempfile, time

# none: no preload; glibc0: glibc's own M_PERTURB fill set to zero; eager: the
# paper's design, measured as is; eager-trim: eager plus the prepare signal
# (malloc_trim) before the checkpoint; pages, lazy: with the prepare signal;
# trim: lazy with no parking (ZIMP_ZEROFREE_LAZY_BYTES=0), i.e. prepare is
# only malloc_trim(0) and free() does nothing extra.
MODES = ["none", "glibc0", "eager", "eager-trim", "pages", "lazy", "trim"]
PREPARED = {"eager-trim", "pages", "lazy", "trim"}
TIMED_AS = {"eager-trim": "eager"}   # same hot path: not timed twice
CODECS = "zstd-1,zstd-3,lz4-1"
HERE = os.path.dirname(os.path.abspath(__file__))


def mode_env(mode, a):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "ZIMP_ZEROFREE", "GLIBC_TUNABLES"):
        env.pop(k, None)
    if mode == "glibc0":
        env["LD_PRELOAD"] = a.perturb
        env["GLIBC_TUNABLES"] = "glibc.malloc.tcache_count=0"
    elif mode != "none":
        env["LD_PRELOAD"] = a.lib
        env["ZIMP_ZEROFREE"] = {"eager-trim": "eager", "trim": "lazy"}.get(mode, mode)
        if mode == "trim":
            env["ZIMP_ZEROFREE_LAZY_BYTES"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    return env


class App:
    def __init__(self, name, a, work):
        self.name, self.a, self.work = name, a, work

    def setup(self):
        w, a = self.work, self.a
        if self.name == "lammps":
            shutil.copy(os.path.join(HERE, "lammps", "in.melt-zf"), w)
            shutil.copy(os.path.join(HERE, "lammps", "pause.sh"), w)
            os.chmod(os.path.join(w, "pause.sh"), 0o755)
        elif self.name == "gromacs":
            for f in ("topol.top", "md.mdp"):
                shutil.copy(os.path.join(HERE, "gromacs", f), w)
            q = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=w, check=True)
            subprocess.run(["gmx", "-quiet", "solvate", "-cs", "spc216.gro", "-box", "2.5", "2.5",
                            "2.5", "-o", "water.gro"], **q)
            subprocess.run(["gmx", "-quiet", "grompp", "-f", "md.mdp", "-c", "water.gro", "-p",
                            "topol.top", "-o", "md.tpr", "-maxwarn", "5"], **q)

    def cmd(self, pause):
        a = self.a
        if self.name == "synth":
            return [a.synth, str(a.synth_iters)]
        if self.name == "lammps":
            return ["lmp", "-in", "in.melt-zf", "-var", "pause", "1" if pause else "0",
                    "-var", "n", str(a.lammps_n), "-var", "steps", str(a.lammps_steps),
                    "-log", "none", "-screen", "none"]
        return ["gmx", "-quiet", "mdrun", "-s", "md.tpr", "-deffnm", "md", "-nt", "1", "-pin", "off"]

    def timed(self, mode):
        t0 = time.monotonic()
        p = subprocess.Popen(self.cmd(False), cwd=self.work, env=mode_env(mode, self.a),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        if status != 0:
            raise RuntimeError(f"{self.name}/{mode} exited with status {status}")
        return ru.ru_utime + ru.ru_stime, wall

    def checkpoint(self, mode):
        """Runs to the checkpoint point, measures, ends the run."""
        w = self.work
        env = mode_env(mode, self.a)
        fifo = None
        if self.name == "synth":
            env["SYNTH_PAUSE"] = "1"
            p = subprocess.Popen(self.cmd(True), cwd=w, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert p.stdout.readline().strip() == "pause"
        elif self.name == "lammps":
            for f in ("ready", "go"):
                if os.path.exists(os.path.join(w, f)):
                    os.unlink(os.path.join(w, f))
            os.mkfifo(os.path.join(w, "go"))
            p = subprocess.Popen(self.cmd(True), cwd=w, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            while not os.path.exists(os.path.join(w, "ready")):
                if p.poll() is not None:
                    raise RuntimeError("lammps ended before the checkpoint point")
                time.sleep(0.05)
            fifo = os.path.join(w, "go")
        else:
            log = os.path.join(w, "md.log")
            if os.path.exists(log):
                os.unlink(log)
            p = subprocess.Popen(self.cmd(True), cwd=w, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            while True:   # the second energy block: nstlog steps into the MD
                if p.poll() is not None:
                    raise RuntimeError("gromacs ended before the checkpoint point")
                if os.path.exists(log) and open(log, errors="replace").read().count("   Step           Time") >= 2:
                    break
                time.sleep(0.02)
        meter = [self.a.ckpt, "--json", "--stop", "--codecs", CODECS]
        if mode in PREPARED:
            meter.append("--prepare")
        r = subprocess.run(meter + [str(p.pid)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"zimp-ckpt failed: {r.stderr}")
        if r.stderr:
            sys.stderr.write(r.stderr)
        result = json.loads(r.stdout)
        if fifo:
            with open(fifo, "w") as f:
                f.write("\n")
        p.kill()
        p.wait()
        return result


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--synth", required=True)
    ap.add_argument("--perturb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--apps", default="synth,lammps,gromacs")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--synth-iters", type=int, default=60)
    ap.add_argument("--lammps-n", type=int, default=10)
    ap.add_argument("--lammps-steps", type=int, default=400)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    modes = a.modes.split(",")
    runs_rows, ckpts = [], {}
    rnd = random.Random(1)
    for name in a.apps.split(","):
        if name != "synth" and not shutil.which("lmp" if name == "lammps" else "gmx"):
            print(f"skip {name}: not installed", file=sys.stderr)
            continue
        work = tempfile.mkdtemp(prefix=f"zf-{name}-")
        app = App(name, a, work)
        app.setup()
        ckpts[name] = {}
        for mode in modes:
            ckpts[name][mode] = app.checkpoint(mode)
            t = ckpts[name][mode]["total"]
            print(f"{name:8s} {mode:7s} ckpt: dumped {t['dumped_pages']} zero {t['zero_pages']} "
                  f"nonzero {t['nonzero_pages']} zstd-3 {t['compressed']['zstd-3']}", flush=True)
        for r in range(a.runs):
            order = [m for m in modes if m not in TIMED_AS]
            rnd.shuffle(order)
            for mode in order:
                cpu, wall = app.timed(mode)
                runs_rows.append(dict(app=name, mode=mode, run=r, cpu_s=round(cpu, 4), wall_s=round(wall, 4)))
                print(f"{name:8s} {mode:7s} run {r}: cpu {cpu:.3f} s wall {wall:.3f} s", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(a.out, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["app", "mode", "run", "cpu_s", "wall_s"])
        w.writeheader()
        w.writerows(runs_rows)
    with open(os.path.join(a.out, "ckpt.json"), "w") as f:
        json.dump(ckpts, f, indent=1)
    # summary: medians, overhead vs none, checkpoint sizes vs none
    rows = []
    for name in ckpts:
        base_cpu = median([x["cpu_s"] for x in runs_rows if x["app"] == name and x["mode"] == "none"])
        base_wall = median([x["wall_s"] for x in runs_rows if x["app"] == name and x["mode"] == "none"])
        b = ckpts[name]["none"]["total"]
        for mode in modes:
            tm = TIMED_AS.get(mode, mode)
            cpu = median([x["cpu_s"] for x in runs_rows if x["app"] == name and x["mode"] == tm])
            wall = median([x["wall_s"] for x in runs_rows if x["app"] == name and x["mode"] == tm])
            t = ckpts[name][mode]["total"]
            ps = ckpts[name][mode]["page_size"]
            row = dict(app=name, mode=mode, prepared=mode in PREPARED, cpu_median_s=round(cpu, 3),
                       cpu_overhead_pct=round(100 * (cpu / base_cpu - 1), 2),
                       wall_median_s=round(wall, 3),
                       wall_overhead_pct=round(100 * (wall / base_wall - 1), 2),
                       resident_mib=round(t["resident_pages"] * ps / 2**20, 2),
                       dumped_mib=round(t["dumped_bytes"] / 2**20, 2),
                       zero_pages=t["zero_pages"], partial_pages=t["partial_pages"],
                       nonzero_mib=round(t["nonzero_bytes"] / 2**20, 2),
                       nonzero_vs_none_pct=round(100 * (t["nonzero_bytes"] / b["nonzero_bytes"] - 1), 2))
            for c in CODECS.split(","):
                row[f"{c}_mib"] = round(t["compressed"][c] / 2**20, 3)
                row[f"{c}_vs_none_pct"] = round(100 * (t["compressed"][c] / b["compressed"][c] - 1), 2)
            rows.append(row)
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
