#!/usr/bin/python3
"""Report of the frontier benchmark: reads OUT/meta.json and OUT/runs.jsonl (written by
frontier_bench.sh), adds the true-permutation reference (figures computed here with the
same definitions as hdmlp-bench's, over seeded numpy permutations), and writes
OUT/results.json, OUT/table.txt and OUT/frontier.png.

    frontier_report.py OUT
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np


def permutation_figures(n, k, epochs, seed=1):
    """same_chunk_distance and epoch_position_correlation of independent uniform
    permutations (the per-file reader's order), as hdmlp-bench defines them."""
    rng = np.random.default_rng(seed)
    dist_sum = dist_norm = 0.0
    corrs = []
    prev = None
    for _ in range(epochs):
        order = rng.permutation(n)
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        for c0 in range(0, n, k):
            p = np.sort(pos[c0:c0 + k])
            m = len(p)
            # sum over pairs of |pi - pj| for sorted p: sum_i p_i * (2i - m + 1)
            dist_sum += float(np.sum(p * (2 * np.arange(m) - m + 1)))
            dist_norm += m * (m - 1) / 2 * (n + 1) / 3
        if prev is not None:
            corrs.append(float(np.corrcoef(prev, pos)[0, 1]))
        prev = pos
    return dist_sum / dist_norm, (sum(corrs) / len(corrs)) if corrs else float("nan")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: frontier_report.py OUT")
    out = sys.argv[1]
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    rows = []
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            if not line.strip():
                continue
            run = json.loads(line)
            r = run.get("result") or {}
            ch = (r.get("dataset") or {}).get("chunks")
            rows.append({
                "mode": run["mode"], "k": run["k"], "ok": bool(r), "load": run.get("load"),
                "read_amplification": r.get("read_amplification"),
                "same_chunk_distance": r.get("same_chunk_distance"),
                "epoch_position_correlation": r.get("epoch_position_correlation"),
                "loads_per_chunk": r.get("loads_per_chunk"),
                "chunk_loads": r.get("chunk_loads"), "chunks": ch,
                "misses": r.get("misses"), "ops_per_sample": r.get("ops_per_sample"),
                "whole_refills": r.get("whole_refills"), "ranged_refills": r.get("ranged_refills"),
                "abstract_chunks": r.get("abstract_chunks"),
                "slot_fraction": (r["abstract_chunks"] * run["k"] / meta["samples"])
                if r.get("abstract_chunks") else None,
            })
    n, epochs = meta["samples"], meta["epochs"]
    perm = []
    for k in sorted({r["k"] for r in rows}):
        d, c = permutation_figures(n, k, epochs)
        perm.append({"mode": "permutation-per-file", "k": k, "ok": True,
                     "read_amplification": 1.0, "same_chunk_distance": d,
                     "epoch_position_correlation": c, "loads_per_chunk": None,
                     "ops_per_sample": 1.0, "note": "computed: numpy permutations, same "
                     "definitions; read amplification 1.0 by definition (each file read once)"})
    lines = [f"hdmlp randomness-I/O frontier  {meta['date']}  git {meta['git']}",
             f"dataset: {n} samples, mean {meta['sizes']['mean'] / 1024:.1f} KiB (lognormal "
             f"sigma 0.6), memory {meta['memory_pct']} %, batch {meta['batch']}, {epochs} "
             f"epochs per run, seed 1; packed K in {meta['ks']}",
             "",
             f"{'mode':22s} {'K':>3s} {'read/dlv':>8s} {'same_chunk_dist':>15s} "
             f"{'epoch_pos_corr':>14s} {'loads/ch':>8s} {'ops/smp':>7s} {'whole/ranged':>13s} "
             f"{'slots':>5s}"]

    def f(v, spec):
        return "-" if v is None else spec.format(v)

    for r in sorted(rows, key=lambda r: (r["mode"], r["k"])) + perm:
        if not r["ok"]:
            lines.append(f"{r['mode']:22s} {r['k']:3d} FAILED")
            continue
        wr = "-" if r.get("whole_refills") is None else f"{r['whole_refills']}/{r['ranged_refills']}"
        lines.append(f"{r['mode']:22s} {r['k']:3d} {f(r['read_amplification'], '{:.2f}'):>8s} "
                     f"{f(r['same_chunk_distance'], '{:.3f}'):>15s} "
                     f"{f(r['epoch_position_correlation'], '{:+.4f}'):>14s} "
                     f"{f(r.get('loads_per_chunk'), '{:.2f}'):>8s} "
                     f"{f(r.get('ops_per_sample'), '{:.3f}'):>7s} {wr:>13s} "
                     f"{f(None if r.get('slot_fraction') is None else 100 * r['slot_fraction'], '{:.0f}%'):>5s}")
    lines += ["",
              "read/dlv: bytes read / bytes delivered; same_chunk_dist: mean delivery-position "
              "distance of same-chunk pairs / that of a permutation (1.0 = as random, lower = "
              "clustered in time); epoch_pos_corr: Pearson r of a sample's positions in "
              "consecutive epochs; loads/ch: chunk loads / chunks / epochs; ops/smp: read "
              "operations per delivered sample; slots: A*K/N. fill-rate-A/-B: the strict order with "
              "the Brand protocol's refill (the default), refill auto with regime A's (6667 "
              "us/op, 400 MB/s) or B's (100 us/op) cost model; clairvoyant-*: the strict order, "
              "policy clairvoyant; "
              "pool-rR: the pool order at R reads per chunk per epoch, regime A's cost. "
              "permutation-per-file: computed (numpy), read amplification 1.0 by definition."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.txt"), "w") as fh:
        fh.write(text)
    sys.stdout.write(text)
    plots = []
    if shutil.which("gnuplot"):
        series = []
        styles = {"clairvoyant-A": 7, "clairvoyant-B": 5, "fill-rate-A": 9, "fill-rate-B": 11,
                  "fill-rate-whole": 13, "pool-r1": 4, "pool-r2": 6, "pool-r4": 8, "pool-r8": 10}
        for mode in sorted({r["mode"] for r in rows}):
            dat = os.path.join(out, f"frontier_{mode}.dat")
            with open(dat, "w") as fh:
                for r in sorted((x for x in rows if x["mode"] == mode and x["ok"]),
                                key=lambda x: x["k"]):
                    fh.write(f"{r['same_chunk_distance']} {r['ops_per_sample']} K={r['k']}\n")
            series.append(f"'{dat}' using 1:2 with linespoints pt {styles.get(mode, 1)} ps 1.6 "
                          f"title '{mode}', '{dat}' using 1:2:3 with labels offset 1.2,0.6 "
                          "font ',8' notitle")
        dat = os.path.join(out, "frontier_permutation.dat")
        with open(dat, "w") as fh:
            fh.write("1.0 1.0 permutation\n")  # one read per sample
        series.append(f"'{dat}' using 1:2 with points pt 3 ps 2.5 lc rgb 'black' "
                      "title 'true permutation, per file (1.0, 1.0)'")
        script = (f"set terminal pngcairo size 900,600\nset output '{out}/frontier.png'\n"
                  "set termoption noenhanced\n"
                  f"set title 'Randomness vs I/O: {n} samples ~110 KiB, memory "
                  f"{meta['memory_pct']} %, {epochs} epochs'\n"
                  "set xlabel 'same_chunk_distance (1.0 = as random as a permutation)'\n"
                  "set ylabel 'read operations per delivered sample'\nset logscale y\n"
                  "set xrange [0:1.1]\nset yrange [0.005:2]\nset grid\nset key top left\n"
                  f"plot {', '.join(series)}\n")
        gp = os.path.join(out, "frontier.gp")
        with open(gp, "w") as fh:
            fh.write(script)
        r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if r.returncode == 0:
            plots.append("frontier.png")
        else:
            print(f"frontier_report: gnuplot: {r.stderr.strip()}", file=sys.stderr)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "runs": rows, "permutation": perm, "plots": plots}, fh, indent=1)
        fh.write("\n")
    print(f"\nwrote {out}/results.json, table.txt, " + ", ".join(plots))


if __name__ == "__main__":
    main()
