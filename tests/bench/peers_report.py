#!/usr/bin/python3
"""Report of peers_bench.sh: peers_report.py OUT

Reads OUT/results.jsonl (records "figures": a contender's randomness over several epochs;
"run": one cold epoch in the cell) and OUT/meta.json; writes OUT/table.md (markdown),
OUT/results.json (the medians and every round) and OUT/frontier.png (cold epoch time
against same-chunk distance, every contender, one series per regime; gnuplot), and prints
the table.

Per contender and regime, medians over rounds: the cold epoch's seconds (the program's own
timer of epoch 0: hdmlp-bench's epoch_seconds[0] with loader creation, the recipe's and
hdmlp.torch's from creating the epoch's iterator with worker start-up, loader_perfile's
from the first open), the ratio to the recipe's, samples/s, the operations and bytes the
disk served to the cell (blkio), bytes per operation, the cell's peak memory (page cache
included) and limit; then the four figures of the contender's order and whether each cell
run's epoch 0 delivered the same order as the figures run ("order same": yes/no per round),
what ran (mode) and the machine's 1-minute load average after the runs (median; 2 cores:
above ~2 other jobs shared the CPUs, which slows the Python contenders most).
"""
import json
import os
import statistics
import subprocess
import sys


def load(out):
    rows = [json.loads(line) for line in open(os.path.join(out, "results.jsonl")) if line.strip()]
    meta = {}
    for name in ("meta.json", "build_check.json"):
        p = os.path.join(out, name)
        if os.path.exists(p):
            with open(p) as f:
                meta.update(json.load(f))
    return rows, meta


def epoch_seconds(r):
    res = r.get("result") or {}
    es = res.get("epoch_seconds")
    if es:
        return es[0]
    if res.get("seconds") is not None:
        return res["seconds"]
    return None


def samples_of(r):
    res = r.get("result") or {}
    for k in ("consumer_samples", "samples"):
        if res.get(k) is not None:
            return res[k]
    return None


def first_line(path):
    try:
        with open(path) as f:
            return f.readline().split()
    except OSError:
        return None


def order_same(out, name, regime, rnd):
    if name == "perfile-c":
        return None
    a = first_line(os.path.join(out, "orders", f"{regime}-{name}-{rnd}.ids"))
    b = first_line(os.path.join(out, "orders", f"{name}-fig.ids"))
    if not a or not b:
        return None
    return a == b


def mode_of(res):
    """What ran: hdmlp-bench's order/policy/pool_reads, hdmlp.torch's order, the recipe's
    implementation."""
    cfg = res.get("config")
    if isinstance(cfg, dict):
        if cfg.get("order") == "pool":
            return f"pool, reads {cfg.get('pool_reads') or 'auto'}"
        policy = cfg.get('policy', '?')
        if policy == "auto" and res.get("policy"):  # the policy auto resolved to
            policy = f"auto: {res['policy']}"
        return f"{cfg.get('order', 'strict')}, {policy}"
    return res.get("order_used") or res.get("recipe") or ""


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, dash="–"):
    return dash if x is None else format(x, spec)


def summarise(out, rows, meta):
    figs = {r["name"]: r for r in rows if r.get("kind") == "figures"}
    runs = [r for r in rows if r.get("kind") == "run"]
    names = []
    for r in rows:
        if r.get("name") and r["name"] not in names:
            names.append(r["name"])
    regimes = sorted({r["regime"] for r in runs})
    summary = []
    for regime in regimes:
        for name in names:
            rs = sorted((r for r in runs if r["name"] == name and r["regime"] == regime),
                        key=lambda r: r["round"])
            if not rs:
                continue
            secs = [epoch_seconds(r) if r["cell"]["rc"] == 0 else None for r in rs]
            n = med([samples_of(r) for r in rs])
            ops = med([r["cell"].get("dev_read_ops") for r in rs])
            dbytes = med([r["cell"].get("dev_read_bytes") for r in rs])
            f = (figs.get(name) or {}).get("figures") or {}
            res0 = (rs[0].get("result") or {})
            summary.append({
                "name": name, "regime": regime, "rounds": len(rs),
                "epoch_seconds": med(secs), "epoch_seconds_rounds": secs,
                "wall_seconds": med([r["cell"]["wall_seconds"] for r in rs]),
                "samples": n,
                "samples_per_s": (n / med(secs)) if n and med(secs) else None,
                "dev_read_ops": ops, "dev_read_bytes": dbytes,
                "bytes_per_op": dbytes / ops if ops else None,
                "peak_memory": med([r["cell"]["peak_memory"] for r in rs]),
                "memory_limit": rs[0]["cell"]["memory_limit"],
                "oom_kills": sum(r["cell"].get("oom_kills", 0) for r in rs),
                "failed_rounds": sum(1 for r in rs if r["cell"]["rc"] != 0),
                "order_same": [order_same(out, name, regime, r["round"]) for r in rs],
                "mode": mode_of(res0),
                "load": med([float(r["load"].split()[0]) for r in rs if r.get("load")]),
                "figures": f,
            })
    for regime in regimes:
        base = next((s["epoch_seconds"] for s in summary
                     if s["regime"] == regime and s["name"] == "recipe"), None)
        for s in summary:
            if s["regime"] == regime:
                s["vs_recipe"] = (s["epoch_seconds"] / base
                                  if base and s["epoch_seconds"] else None)
    return summary


def table(summary, meta):
    lines = []
    impl = meta.get("recipe_impl", "?")
    lines.append(f"{meta.get('count', '?')} samples, {meta.get('bytes', 0) / 1e6:.0f} MB, "
                 f"K = {meta.get('k', 64)}, memory {meta.get('memory_pct', '?')} %, batch "
                 f"{meta.get('batch', '?')}, {meta.get('rounds', '?')} rounds (medians; "
                 f"rounds in brackets), recipe implementation: {impl}; git "
                 f"{meta.get('git', '?')}, {meta.get('date', '?')}")
    notes = []
    if meta.get("build_changed"):  # runs before the snapshot (build_check.json then)
        notes.append("the hdmlp build CHANGED during the run (another build into the same "
                     "tree): rounds may mix library versions (see 'order same')")
    if notes:
        lines.append("NOTE: " + "; ".join(notes) + ".")
    lines.append("")
    lines.append("| regime | contender | cold epoch s | vs recipe | samples/s | dev reads | "
                 "dev MB | MB/read | peak / limit MiB | same-chunk dist | epoch corr | "
                 "spearman | neighbours | order same | mode | load |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|")
    for s in summary:
        f = s["figures"]
        rounds = " / ".join(fmt(x, ".2f", "fail") for x in s["epoch_seconds_rounds"])
        same = "/".join({True: "yes", False: "no", None: "–"}[x] for x in s["order_same"])
        lines.append(
            f"| {s['regime']} | {s['name']} | {fmt(s['epoch_seconds'], '.2f')} ({rounds}) | "
            f"{fmt(s.get('vs_recipe'), '.2f')} | {fmt(s['samples_per_s'], ',.0f')} | "
            f"{fmt(s['dev_read_ops'], ',.0f')} | "
            f"{fmt(s['dev_read_bytes'] and s['dev_read_bytes'] / 1e6, ',.0f')} | "
            f"{fmt(s['bytes_per_op'] and s['bytes_per_op'] / 1e6, '.2f')} | "
            f"{fmt(s['peak_memory'] / 2**20, ',.0f')} / {s['memory_limit'] / 2**20:,.0f} | "
            f"{fmt(f.get('same_chunk_distance'), '.3f')} | "
            f"{fmt(f.get('epoch_position_correlation'), '+.3f')} | "
            f"{fmt(f.get('spearman_storage'), '+.3f')} | "
            f"{fmt(f.get('neighbour_fraction'), '.3f')} | {same} | {s['mode']} | "
            f"{fmt(s['load'], '.1f')} |")
    bad = [s for s in summary if s["failed_rounds"] or s["oom_kills"]]
    for s in bad:
        lines.append(f"\n{s['regime']} {s['name']}: {s['failed_rounds']} failed rounds, "
                     f"{s['oom_kills']} OOM kills")
    return "\n".join(lines) + "\n"


def plot(out, summary):
    regimes = sorted({s["regime"] for s in summary})
    series = []
    for regime in regimes:
        path = os.path.join(out, f"frontier-{regime}.dat")
        with open(path, "w") as f:
            for s in summary:
                d = s["figures"].get("same_chunk_distance")
                if s["regime"] == regime and d is not None and s["epoch_seconds"]:
                    f.write(f"{d:.4f} {s['epoch_seconds']:.4f} {s['name']}\n")
        series.append((regime, path))
    if not series:
        return None
    cmds = ["set terminal pngcairo size 1000,650 noenhanced" if has_cairo() else
            "set terminal png size 1000,650 noenhanced",
            f"set output '{os.path.join(out, 'frontier.png')}'",
            "set title 'Cold epoch time against same-chunk distance (1 = a permutation)'",
            "set xlabel 'same-chunk distance (order_figures.py, K = 64)'",
            "set ylabel 'cold epoch (s, log scale)'", "set logscale y", "set grid",
            "set key top left", "set xrange [0:1.1]"]
    plots = []
    for i, (regime, path) in enumerate(series):
        label = "A: 150 ops/s + 400 MB/s" if regime == "A" else "B: 400 MB/s"
        plots.append(f"'{path}' using 1:2 with points pt {7 + i} ps 1.5 title '{label}'")
        plots.append(f"'{path}' using 1:2:3 with labels offset 1,{0.6 - 1.2 * i} "
                     "left font ',8' notitle")
    cmds.append("plot " + ", ".join(plots))
    try:
        subprocess.run(["gnuplot"], input="\n".join(cmds) + "\n", text=True, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"peers_report: no plot ({e})", file=sys.stderr)
        return None
    return os.path.join(out, "frontier.png")


def has_cairo():
    try:
        r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
        return "pngcairo" in (r.stdout + r.stderr)
    except OSError:
        return False


def main(out):
    rows, meta = load(out)
    summary = summarise(out, rows, meta)
    text = table(summary, meta)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    png = plot(out, summary)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "plot": png}, f, indent=1)
    sys.stdout.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2].strip())
    main(sys.argv[1])
