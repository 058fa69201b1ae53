#!/usr/bin/python3
"""Report of the tiers benchmark: reads OUT/meta.json and OUT/runs.jsonl (written by
tiers_bench.sh) and writes OUT/results.json, OUT/table.txt and OUT/tiers_*.png (gnuplot).

    tiers_report.py OUT
"""
import json
import os
import shutil
import subprocess
import sys

MB = 1e6
MIB = 1048576.0
ORDER = ["local", "off", "ssd0", "ssd25", "ssd50", "ssd100", "ssd100-reuse", "off+compute",
         "ssd100+compute", "reuse-staged", "ram25-of-m50"]


def load(out):
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    runs = []
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return meta, runs


def fmt(v, spec="{:.2f}", none="-"):
    return none if v is None else spec.format(v)


def row(run):
    r = run.get("result") or {}
    p = run.get("plan") or {}
    cell = run.get("cell") or {}
    ok = bool(r) and cell.get("rc", 1) == 0
    m = {"tag": run["tag"], "regime": run["regime"], "config": run["config"], "ok": ok,
         "memory_pct": run["memory_pct"], "load_before": run.get("load_before"),
         "load_after": run.get("load_after"), "args": run.get("args")}
    if not ok:
        m["error"] = f"rc {cell.get('rc')}, oom kills {cell.get('oom_kills')}"
    es = r.get("epoch_seconds") or []
    esb = r.get("epoch_source_bytes") or []
    m.update(
        seconds=r.get("seconds"), epoch_seconds=es, epoch_source_bytes=esb,
        plan_epoch_source_bytes=p.get("epoch_source_bytes") or [],
        samples=r.get("samples"), bytes_delivered=r.get("bytes_delivered"),
        bytes_read=r.get("bytes_read"), source_bytes=r.get("source_bytes"),
        ssd_cache_bytes=r.get("ssd_cache_bytes"), ram_cache_bytes=r.get("ram_cache_bytes"),
        ssd_staged_chunks=r.get("ssd_staged_chunks"),
        ram_cached_chunks=r.get("ram_cached_chunks"), tier_fallbacks=r.get("tier_fallbacks"),
        chunk_loads=r.get("chunk_loads"), misses=r.get("misses"), read_ops=r.get("read_ops"),
        stall_seconds=r.get("stall_seconds"), peak_memory_bytes=r.get("peak_memory_bytes"),
        memory_budget=r.get("memory_budget"), peak_rss_bytes=r.get("peak_rss_bytes"),
        plan={k: p.get(k) for k in ("chunk_loads", "bytes_read", "source_bytes", "misses",
                                    "read_ops", "ram_cache_bytes", "ssd_cache_bytes",
                                    "samples_filled", "whole_refills", "ranged_refills")},
        cell_peak_memory=cell.get("peak_memory"),
        source_dev_read_bytes=cell.get("source_dev_read_bytes"),
        source_dev_read_ops=cell.get("source_dev_read_ops"),
        root_dev_read_bytes=cell.get("root_dev_read_bytes"),
        root_dev_read_ops=cell.get("root_dev_read_ops"),
    )
    return m


def goals(rows, meta):
    out = []
    for regime in ("A", "B"):
        local = next((m for m in rows if m["regime"] == regime and m["config"] == "local"
                      and m["ok"]), None)
        lim = None
        if local and len(local["epoch_seconds"]) > 1:
            lim = sorted(local["epoch_seconds"])[len(local["epoch_seconds"]) // 2]
        for m in rows:
            if m["regime"] != regime or not m["ok"] or m["config"] not in ("ssd100", "ssd100-reuse",
                                                                   "ssd100+compute",
                                                                   "reuse-staged"):
                continue
            later = m["epoch_source_bytes"][1:]
            zero = bool(later) and all(b == 0 for b in later)
            es = m["epoch_seconds"][1:]
            mean_later = sum(es) / len(es) if es else None
            out.append({"regime": regime, "config": m["config"],
                        "source_bytes_after_epoch_0": sum(later) if later else None,
                        "pass_zero": zero, "epoch_seconds_after_0": mean_later,
                        "local_epoch_seconds": lim,
                        "vs_local": (mean_later / lim) if mean_later and lim else None})
    return out


def table(rows, meta, goal_rows):
    L = []
    L.append(f"hdmlp tiers benchmark  {meta['date']}  kernel {meta['kernel']}, {meta['cpus']} "
             f"CPUs, git {meta['git']}, {meta['epochs']} epochs per run")
    L.append(f"source: {meta['loop']} ({meta['loop_dev']}, ext4 image on {meta['root_disk']}, "
             f"losetup --direct-io=on, max request {meta['loop_max_sectors_kb']} KiB), throttled "
             f"to {meta['read_bps'] / MB:.0f} MB/s (+ {meta['iops_a']} ops/s in regime A); SSD "
             f"cache dir and the 'local' copy on {meta['root_disk']} ({meta['root_dev']}, max "
             f"request {meta['root_max_sectors_kb']} KiB), unthrottled")
    for reg, d in sorted(meta["datasets"].items()):
        L.append(f"  regime {reg}: {d['files']} samples, {d['raw_bytes'] / MIB:.0f} MiB raw "
                 f"({d['segment_bytes'] / MIB:.0f} MiB of segments = 100 % SSD capacity), K=64, "
                 f"batch {d['batch']}, memory 25 % (+{meta['allowance'] / MIB:.0f} MiB cell allowance)")
    L.append("cell: memory limit incl. page cache, caches dropped before every run; hdmlp reads "
             "the source with O_DIRECT, --ram-cache 0 unless stated; the SSD cache is emptied "
             "before each ssdN run (ssd100-reuse reuses what ssd100 staged, reuse-staged what "
             "ssd100+compute staged; +compute: --compute-ms per batch); ssd0 = off "
             "(--ssd-capacity 0: no SSD tier)")
    for regime in ("A", "B"):
        rs = sorted((m for m in rows if m["regime"] == regime),
                    key=lambda m: ORDER.index(m["config"]) if m["config"] in ORDER else 99)
        if not rs:
            continue
        L.append("")
        L.append(f"regime {regime} ({'150 ops/s + ' if regime == 'A' else ''}400 MB/s on the source)")
        L.append(f"{'config':14s} {'epoch seconds':>34s}  {'source MB per epoch (plan)':>44s} "
                 f"{'SSD MB':>7s} {'staged':>6s} {'srcdev ops':>10s} {'local MB':>10s} "
                 f"{'peak MiB':>8s} {'load':>5s}")
        for m in rs:
            if not m["ok"]:
                L.append(f"{m['config']:14s} FAILED ({m.get('error')})")
                continue
            es = " ".join(f"{x:.1f}" for x in m["epoch_seconds"])
            sb = []
            for i, b in enumerate(m["epoch_source_bytes"]):
                pl = m["plan_epoch_source_bytes"]
                p = f"({pl[i] / MB:.0f})" if i < len(pl) else ""
                sb.append(f"{b / MB:.0f}{p}")
            L.append(f"{m['config']:14s} {es:>34s}  {' '.join(sb):>44s} "
                     f"{fmt((m['ssd_cache_bytes'] or 0) / MB, '{:.0f}'):>7s} "
                     f"{fmt(m['ssd_staged_chunks'], '{:d}'):>6s} "
                     f"{fmt(m['source_dev_read_ops'], '{:d}'):>10s} "
                     f"{fmt(((m['root_dev_read_bytes'] or 0) - (m['source_dev_read_bytes'] or 0)) / MB, '{:.0f}'):>10s} "
                     f"{fmt((m['cell_peak_memory'] or 0) / MIB, '{:.0f}'):>8s} "
                     f"{(m['load_before'] or '-').split()[0]:>5s}")
    L.append("")
    L.append("source MB per epoch: epoch_source_bytes of the run (the forecast's in parentheses); "
             "SSD MB: bytes read from the SSD cache; staged: chunks the stager copied; srcdev "
             "ops: requests the loop device served (blkio); local MB: bytes the root disk served "
             "in the cell minus the loop device's bytes (the loop device's reads of its image "
             "are charged to the cell too), i.e. SSD-cache and 'local' dataset reads; "
             "load: 1-min load average before the run")
    L.append("")
    L.append("goal: with SSD >= the dataset, source reads after the first epoch drop to zero and "
             "epoch time approaches the local tier's limit ('local': median epoch, same loader, "
             "dataset on the root disk, unthrottled)")
    for g in goal_rows:
        L.append(f"  {g['regime']} {g['config']:13s} source bytes after epoch 0: "
                 f"{fmt(g['source_bytes_after_epoch_0'], '{:d}')} "
                 f"({'PASS' if g['pass_zero'] else 'FAIL'}); epochs 1+ "
                 f"{fmt(g['epoch_seconds_after_0'])} s vs local {fmt(g['local_epoch_seconds'])} s "
                 f"= {fmt(g['vs_local'])}x")
    L.append("")
    L.append("forecast (--plan --json) vs run, field by field")
    keys = ("chunk_loads", "misses", "bytes_read", "source_bytes")
    L.append(f"{'run':22s} " + " ".join(f"{k + ' run/plan':>30s}" for k in keys))
    for m in rows:
        if not m["ok"] or m["config"] == "local":
            continue
        cells = []
        for k in keys:
            a, b = m.get(k), m["plan"].get(k)
            mark = "" if a is None or b is None else ("=" if a == b else f" {100 * (a / b - 1) if b else 0:+.1f}%")
            cells.append(f"{fmt(a, '{:d}')}/{fmt(b, '{:d}')}{mark}")
        L.append(f"{m['tag']:22s} " + " ".join(f"{c:>30s}" for c in cells))
    return "\n".join(L) + "\n"


def gnuplot(out, rows):
    if shutil.which("gnuplot") is None:
        print("tiers_report: gnuplot not found: no plots", file=sys.stderr)
        return []
    made = []
    for what, key, scale, ylabel in (("source", "epoch_source_bytes", MB, "source MB read"),
                                     ("time", "epoch_seconds", 1.0, "epoch time (s)")):
        parts = []
        for regime in ("A", "B"):
            series = []
            for m in rows:
                if m["regime"] != regime or not m["ok"] or not m[key]:
                    continue
                dat = os.path.join(out, f"tiers_{what}_{regime}_{m['config']}.dat")
                with open(dat, "w") as f:
                    for i, v in enumerate(m[key]):
                        f.write(f"{i} {v / scale}\n")
                series.append(f"'{dat}' using 1:2 with linespoints title '{m['config']}'")
            if series:
                parts.append((regime, series))
        if not parts:
            continue
        script = (f"set terminal pngcairo size {500 * len(parts)},450\n"
                  f"set output '{out}/tiers_{what}.png'\nset termoption noenhanced\n"
                  f"set multiplot layout 1,{len(parts)}\n")
        for regime, series in parts:
            script += (f"set title 'regime {regime}: {ylabel} per epoch'\nset xlabel 'epoch'\n"
                       f"set ylabel '{ylabel}'\nset grid\nset key top right\nset xtics 1\n"
                       + ("set logscale y\nset yrange [*:*]\n" if what == "time"
                          else "unset logscale y\nset yrange [0:*]\n")
                       + f"plot {', '.join(series)}\n")
        script += "unset multiplot\n"
        path = os.path.join(out, f"tiers_{what}.gp")
        with open(path, "w") as f:
            f.write(script)
        r = subprocess.run(["gnuplot", path], capture_output=True, text=True)
        if r.returncode == 0:
            made.append(f"tiers_{what}.png")
        else:
            print(f"tiers_report: gnuplot: {r.stderr.strip()}", file=sys.stderr)
    return made


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tiers_report.py OUT")
    out = sys.argv[1]
    meta, runs = load(out)
    rows = [row(r) for r in runs]
    goal_rows = goals(rows, meta)
    plots = gnuplot(out, rows)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": rows, "goals": goal_rows, "plots": plots}, f, indent=1)
        f.write("\n")
    text = table(rows, meta, goal_rows)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    print(f"\nwrote {out}/results.json, table.txt, " + ", ".join(plots))


if __name__ == "__main__":
    main()
