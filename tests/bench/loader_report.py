#!/usr/bin/python3
"""Report of the loader benchmark: reads OUT/meta.json and OUT/runs.jsonl (written by
bench_loader.sh), runs the independent Brand simulation (sim_brand.py) for every hdmlp
configuration, and writes OUT/results.json, OUT/table.txt and OUT/*.png (gnuplot).

    loader_report.py OUT
"""
import json
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_brand  # noqa: E402

MB = 1e6
MIB = 1048576.0


def load(out):
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    runs = []
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return meta, runs


def metrics(run):
    """Flat metrics of one run (None where the contender cannot report a value)."""
    r = run.get("result") or {}
    cell = run.get("cell") or {}
    ok = bool(r) and (cell.get("rc", 0) == 0)
    m = {k: run.get(k) for k in ("tag", "kind", "regime", "dataset", "contender",
                                 "memory_pct")}
    m["ok"] = ok
    if not ok:
        m["error"] = f"rc {cell.get('rc')}, oom kills {cell.get('oom_kills')}"
        return m
    sec = r.get("seconds")
    samples = r.get("samples")
    if run["contender"] == "seq-read":
        samples = None
    delivered = r.get("bytes_delivered")
    m.update(
        epochs=r.get("epochs", 1),
        seconds=sec,
        epoch_seconds=(sec / max(1, r.get("epochs", 1))) if sec else None,
        samples=samples,
        samples_per_s=(samples / sec) if samples and sec else None,
        mb_per_s=((delivered if delivered is not None else r.get("bytes_read", 0)) / MB / sec)
        if sec else None,
        bytes_read=r.get("bytes_read"),
        bytes_delivered=delivered,
        read_amplification=(r["bytes_read"] / delivered) if delivered else None,
        misses=r.get("misses"),
        chunk_loads=r.get("chunk_loads"),
        loads_per_chunk=r.get("loads_per_chunk"),
        ops_per_sample=r.get("ops_per_sample"),
        read_ops_loader=r.get("read_ops"),
        abstract_chunks=r.get("abstract_chunks"),
        peak_accounted=r.get("peak_memory_bytes"),
        memory_budget=r.get("memory_budget"),
        stall_seconds=r.get("stall_seconds"),
        peak_rss=r.get("peak_rss_bytes"),
        rss_over_budget=(r["peak_rss_bytes"] - r["memory_budget"])
        if r.get("peak_rss_bytes") is not None and r.get("memory_budget") is not None else None,
        whole_refills=r.get("whole_refills"),
        ranged_refills=r.get("ranged_refills"),
    )
    if "dataset" in r and isinstance(r["dataset"], dict):
        m["n"] = r["dataset"]["samples"]
        m["k"] = r["dataset"]["chunk_size"]
        m["chunks"] = r["dataset"]["chunks"]
        m["policy"] = r["config"]["policy"]
        m["refill"] = r["config"]["refill"]
        if m.get("abstract_chunks"):
            m["slot_fraction"] = min(1.0, m["abstract_chunks"] * m["k"] / m["n"])
    if cell:
        m["cell_peak_memory"] = cell.get("peak_memory")
        m["cell_memory_limit"] = cell.get("memory_limit")
        m["dev_read_bytes"] = cell.get("dev_read_bytes")
        m["dev_read_ops"] = cell.get("dev_read_ops")
        m["wall_seconds"] = cell.get("wall_seconds")
        if samples:
            m["dev_ops_per_sample"] = cell.get("dev_read_ops", 0) / samples
        if delivered:
            m["dev_read_amplification"] = cell.get("dev_read_bytes", 0) / delivered
    return m


def simulate_all(rows):
    """Brand simulation for each (N, K, A, policy) seen; adds sim fields to the rows."""
    cache = {}
    for m in rows:
        if not m.get("ok") or m.get("abstract_chunks") is None or m.get("n") is None:
            continue
        key = (m["n"], m["k"], m["abstract_chunks"], m["policy"])
        if key not in cache:
            n, k, a, policy = key
            runs = max(1, min(5, math.ceil(100000 / n)))
            res = [sim_brand.simulate(n, k, a, 1000 + i, 1, policy) for i in range(runs)]
            vals = [x["mean_loads_per_chunk"] for x in res]
            mean = sum(vals) / runs
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (runs - 1)) if runs > 1 else 0.0
            cache[key] = {"n": n, "k": k, "abstract_chunks": a, "policy": policy, "runs": runs,
                          "loads_per_chunk": mean, "loads_per_chunk_sd": sd,
                          "misses": sum(sum(x["misses"]) for x in res) / runs}
        s = cache[key]
        m["sim_loads_per_chunk"] = s["loads_per_chunk"]
        if m.get("loads_per_chunk") is not None and s["loads_per_chunk"] > 0:
            m["sim_rel_diff"] = m["loads_per_chunk"] / s["loads_per_chunk"] - 1
    return list(cache.values())


def find(rows, kind, regime, dataset, contender, pct=None):
    for m in rows:
        if (m["kind"] == kind and m["regime"] == regime and m["dataset"] == dataset
                and m["contender"] == contender and m.get("ok")
                and (pct is None or m.get("memory_pct") == pct)):
            return m
    return None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def goals(rows, meta):
    """The issue's goals, per regime and main dataset."""
    out = []
    pct = meta["memory_pct"]
    for regime in ("A", "B"):
        for ds in sorted({m["dataset"] for m in rows if m["kind"] == "main"
                          and m["regime"] == regime}):
            g = {"regime": regime, "dataset": ds}
            get = {c: find(rows, "main", regime, ds, c, pct) for c in
                   ("perfile-c", "torch-dataloader", "hdmlp-whole", "hdmlp-ranges",
                    "hdmlp-auto", "hdmlp-random")}
            t = {c: (m["epoch_seconds"] if m else None) for c, m in get.items()}
            g["auto_vs_perfile"] = ratio(t["perfile-c"], t["hdmlp-auto"])
            g["auto_vs_torch"] = ratio(t["torch-dataloader"], t["hdmlp-auto"])
            g["auto_vs_whole"] = ratio(t["hdmlp-whole"], t["hdmlp-auto"])
            g["auto_vs_ranges"] = ratio(t["hdmlp-ranges"], t["hdmlp-auto"])
            best = [x for x in (t["hdmlp-whole"], t["hdmlp-ranges"]) if x is not None]
            g["auto_vs_best_of_whole_ranges"] = ratio(min(best), t["hdmlp-auto"]) if best else None
            if get["hdmlp-auto"] and get["hdmlp-random"]:
                a, r = get["hdmlp-auto"], get["hdmlp-random"]
                g["fill_rate_misses"], g["random_misses"] = a["misses"], r["misses"]
                g["fill_rate_loads"], g["random_loads"] = a["chunk_loads"], r["chunk_loads"]
            checks = []
            if regime == "A":
                checks.append(("auto >= 2.5x per-file", g["auto_vs_perfile"], 2.5))
            else:
                checks.append(("auto >= 1.0x per-file", g["auto_vs_perfile"], 1.0))
                checks.append(("auto >= 3x whole", g["auto_vs_whole"], 3.0))
            checks.append(("auto within 10% of best(whole, ranges)",
                           g["auto_vs_best_of_whole_ranges"], 1 / 1.1))
            g["checks"] = [{"goal": name, "value": v, "threshold": th,
                            "pass": (v is not None and v >= th)} for name, v, th in checks]
            if "fill_rate_misses" in g:
                g["checks"].append({"goal": "fill-rate <= random in misses and loads",
                                    "value": [g["fill_rate_misses"], g["random_misses"],
                                              g["fill_rate_loads"], g["random_loads"]],
                                    "pass": g["fill_rate_misses"] <= g["random_misses"]
                                    and g["fill_rate_loads"] <= g["random_loads"]})
            out.append(g)
    return out


def fmt(v, spec="{:.2f}", none="-"):
    if v is None:
        return none
    return spec.format(v)


def table(rows, meta, goal_rows, sims, warm):
    lines = []
    sz = meta["sizes"]
    lines.append(f"hdmlp loader benchmark  {meta['date']}  kernel {meta['kernel']}, "
                 f"{meta['cpus']} CPUs, device {meta['device']} ({meta['dev']}), git {meta['git']}")
    lines.append(f"cell: memory limit = {meta['memory_pct']}% of the dataset + "
                 f"{meta['c_allowance'] / MIB:.0f} MiB (C) / {meta['py_allowance'] / MIB:.0f} "
                 f"MiB (PyTorch); reads throttled to {meta['read_bps'] / MB:.0f} MB/s, regime A also "
                 f"to {meta['iops_a']} ops/s; caches dropped before every run; 1 epoch, "
                 f"{meta['threads']} threads, batch {meta['batch']} ({meta.get('batch_a')} on the scaled-down "
                 f"img_a/s16_a); hdmlp I/O {meta['hdmlp_io']}")
    for name in ("img", "img_a", "s16", "s16_a"):
        s = sz[name]
        lines.append(f"  dataset {name:6s} {s['count']:7d} files, {s['bytes'] / MIB:8.1f} MiB, "
                     f"mean {s['mean'] / 1024:6.1f} KiB")
    hdr = (f"{'contender':18s} {'epoch s':>8s} {'samples/s':>10s} {'MB/s':>7s} {'read/dlv':>8s} "
           f"{'dev/dlv':>7s} {'ops/smp':>7s} {'loads/ch':>8s} {'sim':>6s} {'misses':>7s} "
           f"{'peak MiB':>8s} {'slots':>5s}")
    for regime in ("A", "B"):
        for ds in sorted({m["dataset"] for m in rows if m["kind"] == "main"
                          and m["regime"] == regime}):
            lines.append("")
            lines.append(f"regime {regime} ({'~150 ops/s + ' if regime == 'A' else ''}"
                         f"400 MB/s), dataset {ds}")
            lines.append(hdr)
            for m in rows:
                if m["kind"] != "main" or m["regime"] != regime or m["dataset"] != ds:
                    continue
                if not m["ok"]:
                    lines.append(f"{m['contender']:18s} FAILED ({m.get('error')})")
                    continue
                ops = m.get("ops_per_sample")
                dev_ops = m.get("dev_ops_per_sample")
                ops_s = fmt(dev_ops, "{:.3f}") if ops is None else \
                    f"{ops:.3f}" if dev_ops is None else f"{dev_ops:.3f}"
                lines.append(
                    f"{m['contender']:18s} {fmt(m['epoch_seconds'], '{:8.2f}'):>8s} "
                    f"{fmt(m.get('samples_per_s'), '{:10.0f}'):>10s} "
                    f"{fmt(m.get('mb_per_s'), '{:7.1f}'):>7s} "
                    f"{fmt(m.get('read_amplification')):>8s} "
                    f"{fmt(m.get('dev_read_amplification')):>7s} {ops_s:>7s} "
                    f"{fmt(m.get('loads_per_chunk')):>8s} "
                    f"{fmt(m.get('sim_loads_per_chunk')):>6s} "
                    f"{fmt(m.get('misses'), '{:d}'):>7s} "
                    f"{fmt((m.get('cell_peak_memory') or 0) / MIB, '{:8.0f}'):>8s} "
                    f"{fmt(None if m.get('slot_fraction') is None else 100 * m['slot_fraction'], '{:4.0f}%'):>5s}")
    lines.append("")
    lines.append("ops/smp: device read operations per delivered sample (blkio io_serviced); "
                 "dev/dlv: device bytes / delivered bytes; sim: independent simulation's loads "
                 "per chunk; peak: cgroup memory.max_usage_in_bytes (incl. page cache); slots: "
                 "A*K/N, the share of the dataset abstract memory holds (the rest of the budget "
                 "is the loader's reserve and lookahead room)")
    for regime in ("A", "B"):
        hd = [m for m in rows if m.get("ok") and m["regime"] == regime and m.get("dev_read_ops")
              and m["kind"] == "main" and m["contender"].startswith("hdmlp")
              and not m["contender"].endswith("-buffered") and m.get("read_ops_loader")]
        if hd:
            split = sorted(m["dev_read_ops"] / m["read_ops_loader"] for m in hd)
            kb = sorted(m["dev_read_bytes"] / m["dev_read_ops"] / 1e3 for m in hd)
            lines.append(f"regime {regime}, main hdmlp runs (O_DIRECT): the disk saw {split[0]:.1f}-{split[-1]:.1f} operations "
                         f"per hdmlp read (median {split[len(split) // 2]:.1f}; {kb[0]:.0f}-"
                         f"{kb[-1]:.0f} KB per disk operation): the kernel splits each large "
                         "read into requests, and the op cap counts requests")
    if any(m["contender"].endswith("-buffered") for m in rows):
        lines.append("hdmlp-auto-buffered: without O_DIRECT the page cache may hold up to the "
                     f"cell's {meta['c_allowance'] / MIB:.0f} MiB allowance; where that is most of "
                     "the dataset (s16_a) chunks are re-read from memory, not disk (dev/dlv)")
    over = [m for m in rows if m.get("ok") and m.get("rss_over_budget") is not None
            and m["kind"] in ("main", "sweep-k", "sweep-mem")]
    if over:
        w = max(over, key=lambda m: m["rss_over_budget"])
        lines.append(f"hdmlp peak RSS - budget (process, getrusage): max "
                     f"{w['rss_over_budget'] / MIB:.1f} MiB ({w['tag']}, budget "
                     f"{w['memory_budget'] / MIB:.1f} MiB), median "
                     f"{sorted(m['rss_over_budget'] for m in over)[len(over) // 2] / MIB:.1f} MiB")
    lines.append("")
    lines.append("goals")
    for g in goal_rows:
        for c in g["checks"]:
            v = c["value"]
            vs = fmt(v, "{:.2f}") if not isinstance(v, list) else " ".join(map(str, v))
            lines.append(f"  {g['regime']} {g['dataset']:10s} {c['goal']:42s} {vs:>18s}  "
                         f"{'PASS' if c['pass'] else 'FAIL'}")
    sweep = [m for m in rows if m["kind"] in ("sweep-k", "main") and m.get("ok")
             and m["dataset"].startswith("img_a_k") and m["contender"] in
             ("hdmlp-whole", "hdmlp-auto") and m.get("memory_pct") == meta["memory_pct"]]
    if sweep:
        lines.append("")
        lines.append("chunk-size sweep (dataset img_a, 25% memory): epoch s / loads per chunk "
                     "(sim)")
        lines.append(f"{'K':>5s} {'A whole':>16s} {'A auto':>16s} {'B whole':>16s} "
                     f"{'B auto':>16s}")
        for k in sorted({m["k"] for m in sweep}):
            cells = []
            for regime in ("A", "B"):
                for c in ("hdmlp-whole", "hdmlp-auto"):
                    m = next((x for x in sweep if x["k"] == k and x["regime"] == regime
                              and x["contender"] == c), None)
                    failed = any(x for x in rows if x["kind"] == "sweep-k" and not x["ok"]
                                 and x["regime"] == regime and x["contender"] == c
                                 and x["dataset"] == f"img_a_k{k}")
                    cells.append(("FAILED" if failed else "-") if m is None else
                                 f"{m['epoch_seconds']:.1f}/{m['loads_per_chunk']:.2f}"
                                 f"({fmt(m.get('sim_loads_per_chunk'))})")
            lines.append(f"{k:5d} " + " ".join(f"{c:>16s}" for c in cells))
    mem = [m for m in rows if m.get("ok") and m["contender"] == "hdmlp-auto"
           and m["dataset"] == "img_a_k64" and m["kind"] in ("sweep-mem", "main")]
    if mem:
        lines.append("")
        lines.append("memory sweep (img_a, K=64, auto): memory % -> samples/s, loads per chunk")
        for regime in ("A", "B"):
            pts = sorted((m["memory_pct"], m["samples_per_s"], m["loads_per_chunk"])
                         for m in mem if m["regime"] == regime)
            lines.append(f"  {regime}: " + ", ".join(f"{p}%: {s:.0f}/s {lpc:.2f}"
                                                     for p, s, lpc in pts))
    lines.append("")
    lines.append("warm path (budget 200% of the dataset, page cache warm, no cell)")
    for w in warm:
        lines.append(f"  {w['dataset']:10s} {fmt(w.get('samples_per_s'), '{:.0f}')} samples/s, "
                     f"{fmt(w.get('gb_per_s'), '{:.2f}')} GB/s delivered"
                     + ("" if w.get("ok") else "  FAILED"))
    lines.append("")
    agree = [m for m in rows if m["kind"] == "agree"]
    lines.append(f"simulation vs loader, loads per chunk ({agree[0]['epochs'] if agree else '-'} "
                 "epochs, warm, 25% memory; simulation averaged over 5 seeds)")
    for m in agree:
        if not m.get("ok"):
            lines.append(f"  {m['dataset']:12s} {m['contender']:16s} FAILED")
            continue
        d = m.get("sim_rel_diff")
        lines.append(f"  {m['dataset']:12s} {m['contender']:16s} A={m['abstract_chunks']:<5d} "
                     f"loader {m['loads_per_chunk']:6.3f}  sim {m['sim_loads_per_chunk']:6.3f}  "
                     f"diff {fmt(None if d is None else 100 * d, '{:+.1f}')} %  "
                     f"{'PASS' if d is not None and abs(d) <= 0.05 else 'FAIL'}")
    worst = agreement(rows, "agree")
    worst1 = agreement(rows, None)
    lines.append(f"  worst difference {fmt(None if worst is None else 100 * worst, '{:.1f}')} % "
                 f"(goal <= 5 %); over the single-epoch cell runs too: "
                 f"{fmt(None if worst1 is None else 100 * worst1, '{:.1f}')} %")
    return "\n".join(lines) + "\n"


def agreement(rows, kind):
    return max((abs(m["sim_rel_diff"]) for m in rows if m.get("sim_rel_diff") is not None
                and (kind is None or m["kind"] == kind)), default=None)


def gnuplot(out, rows, meta):
    if shutil.which("gnuplot") is None:
        print("loader_report: gnuplot not found: no plots", file=sys.stderr)
        return []
    made = []
    pct = meta["memory_pct"]
    # 1. contenders per regime: samples/s (log scale), one cluster per dataset.
    for regime in ("A", "B"):
        dss = sorted({m["dataset"] for m in rows if m["kind"] == "main" and m["regime"] == regime})
        cons = []
        for m in rows:
            if m["kind"] == "main" and m["regime"] == regime and m["contender"] not in cons \
                    and m["contender"] != "seq-read":
                cons.append(m["contender"])
        dat = os.path.join(out, f"contenders_{regime}.dat")
        with open(dat, "w") as f:
            f.write("# contender " + " ".join(dss) + "\n")
            for c in cons:
                vals = []
                for ds in dss:
                    m = find(rows, "main", regime, ds, c, pct)
                    vals.append(f"{m['samples_per_s']:.3f}" if m and m.get("samples_per_s")
                                else "NaN")
                f.write(c + " " + " ".join(vals) + "\n")
        cols = ", ".join(f"'' using {i + 2}:xtic(1) title '{ds}'" if i == 0 else
                        f"'' using {i + 2} title '{ds}'" for i, ds in enumerate(dss))
        plot = cols.replace("''", f"'{dat}'", 1)
        script = (f"set terminal pngcairo size 900,540\nset output '{out}/contenders_{regime}.png'\n"
                  f"set title 'Regime {regime}: samples/s per contender (1 epoch, cold, cell)'\n"
                  "set style data histograms\nset style fill solid 0.8 border -1\n"
                  "set logscale y\nset ylabel 'samples/s'\nset key top left\nset grid y\n"
                  "set xtics rotate by -25\nset boxwidth 0.9\n"
                  f"plot {plot}\n")
        if run_gnuplot(out, f"contenders_{regime}", script):
            made.append(f"contenders_{regime}.png")
    # 2. K sweep: epoch time and loads per chunk.
    sweep = [m for m in rows if m.get("ok") and m["kind"] in ("sweep-k", "main")
             and m["dataset"].startswith("img_a_k") and m.get("memory_pct") == pct
             and m["contender"] in ("hdmlp-whole", "hdmlp-auto")]
    if sweep:
        series = []
        for regime in ("A", "B"):
            for c in ("hdmlp-whole", "hdmlp-auto"):
                pts = sorted((m["k"], m["epoch_seconds"], m["loads_per_chunk"],
                              m.get("sim_loads_per_chunk") or float("nan"))
                             for m in sweep if m["regime"] == regime and m["contender"] == c)
                if pts:
                    dat = os.path.join(out, f"sweep_k_{regime}_{c}.dat")
                    with open(dat, "w") as f:
                        for p in pts:
                            f.write(" ".join(str(x) for x in p) + "\n")
                    series.append((regime, c, dat))
        plot = ", ".join(f"'{d}' using 1:2 with linespoints title '{r} {c[6:]}'"
                         for r, c, d in series)
        script = ("set terminal pngcairo size 800,500\n"
                  f"set output '{out}/sweep_k_time.png'\n"
                  "set title 'Epoch time vs chunk size K (img_a, 25% memory)'\n"
                  "set logscale x 2\nset logscale y\nset xlabel 'K (samples per chunk)'\n"
                  "set ylabel 'epoch time (s)'\nset grid\nset key top left\n"
                  f"plot {plot}\n")
        if run_gnuplot(out, "sweep_k_time", script):
            made.append("sweep_k_time.png")
        plot = ", ".join(f"'{d}' using 1:3 with linespoints title 'loader {r} {c[6:]}'"
                         for r, c, d in series)
        if series:
            longest = max(series, key=lambda x: sum(1 for _ in open(x[2])))
            plot += f", '{longest[2]}' using 1:4 with lines dt 2 lw 2 title 'simulation'"
        script = ("set terminal pngcairo size 800,500\n"
                  f"set output '{out}/sweep_k_loads.png'\n"
                  "set title 'Loads per chunk per epoch vs K (img_a, 25% memory)'\n"
                  "set logscale x 2\nset xlabel 'K (samples per chunk)'\n"
                  "set ylabel 'chunk loads / chunks / epochs'\nset grid\nset key top left\n"
                  f"plot {plot}\n")
        if run_gnuplot(out, "sweep_k_loads", script):
            made.append("sweep_k_loads.png")
    # 3. memory sweep.
    mem = [m for m in rows if m.get("ok") and m["contender"] == "hdmlp-auto"
           and m["dataset"] == "img_a_k64" and m["kind"] in ("sweep-mem", "main")]
    if mem:
        parts = []
        for regime in ("A", "B"):
            pts = sorted((m["memory_pct"], m["samples_per_s"]) for m in mem if m["regime"] == regime)
            if pts:
                dat = os.path.join(out, f"sweep_mem_{regime}.dat")
                with open(dat, "w") as f:
                    for p in pts:
                        f.write(f"{p[0]} {p[1]}\n")
                parts.append(f"'{dat}' using 1:2 with linespoints title 'hdmlp auto, regime {regime}'")
        for regime in ("A", "B"):
            pf = find(rows, "main", regime, "img_a_k64", "perfile-c", pct)
            if pf:
                parts.append(f"{pf['samples_per_s']:.3f} with lines dt 2 title 'per-file, regime {regime}'")
        script = ("set terminal pngcairo size 800,500\n"
                  f"set output '{out}/sweep_memory.png'\n"
                  "set title 'Throughput vs memory budget (img_a, K=64)'\n"
                  "set xlabel 'memory budget (% of dataset)'\nset ylabel 'samples/s'\n"
                  "set logscale y\nset grid\nset key bottom right\n"
                  f"plot {', '.join(parts)}\n")
        if run_gnuplot(out, "sweep_memory", script):
            made.append("sweep_memory.png")
    return made


def run_gnuplot(out, name, script):
    script = script.replace("\n", "\nset termoption noenhanced\n", 1)
    path = os.path.join(out, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", path], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"loader_report: gnuplot {name}: {r.stderr.strip()}", file=sys.stderr)
        return False
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: loader_report.py OUT")
    out = sys.argv[1]
    meta, runs = load(out)
    rows = [metrics(r) for r in runs]
    sims = simulate_all(rows)
    warm = []
    for m, r in zip(rows, runs):
        if m["kind"] == "warm":
            res = r.get("result") or {}
            warm.append({"dataset": m["dataset"], "ok": bool(res),
                         "samples_per_s": res.get("samples_per_s"),
                         "gb_per_s": (res.get("mb_per_s") or 0) / 1000 if res else None,
                         "epochs": res.get("epochs"), "seconds": res.get("seconds")})
    goal_rows = goals(rows, meta)
    for w in warm:
        if w["dataset"].startswith("img"):
            w["goal"] = "GB/s >= 2"
            w["pass"] = w["ok"] and w["gb_per_s"] >= 2
        else:
            w["goal"] = "samples/s >= 500k"
            w["pass"] = w["ok"] and w["samples_per_s"] >= 500000
    plots = gnuplot(out, rows, meta)
    worst = agreement(rows, "agree")
    results = {"meta": meta, "runs": rows, "goals": goal_rows, "warm": warm,
               "simulation": sims,
               "sim_agreement": {"worst_rel_diff": worst,
                                 "worst_rel_diff_all_runs": agreement(rows, None),
                                 "pass": worst is not None and worst <= 0.05},
               "plots": plots}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    text = table(rows, meta, goal_rows, sims, warm)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    print(f"\nwrote {out}/results.json, table.txt, " + ", ".join(plots))


if __name__ == "__main__":
    main()
