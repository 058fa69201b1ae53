#!/usr/bin/python3
"""Tables and plot of a fidelity_bench.py run (issues 14 and 23).

    tests/bench/fidelity_report.py OUT [--md FILE] [--png FILE]

Reads OUT/runs.jsonl, OUT/bench.jsonl and OUT/config.json (or fidelity_*.jsonl/json: the
copies committed in tests/bench/results/). Prints (and writes to --md):
  - the final test accuracy (mean ± sample std over seeds) of every order on every task,
    and for the imbalanced tasks the minority classes' mean recall;
  - strict against pool and the recipe at the same memory: Δ = strict's mean − the
    other's, σ = the two orders' pooled sample std (root mean square of both), Δ/σ and
    Welch's t; "strict better by > 1 σ" where Δ > σ (and the other way round);
  - per task the accuracy after each epoch and the final training loss;
  - the frontier: reads per chunk per epoch and read amplification (hdmlp-bench, first
    seed; strict with whole-chunk refills), the randomness figures of the delivered orders
    (order_figures.py), batch class share, accuracy;
  - the goals of issue 14: strict at the defaults (K = 64, 25 %) within one std of the
    permutation, the control clearly worse.
--png draws per task the accuracy curves, the final accuracy per order and the minority
recall (imbalanced tasks) or training loss (matplotlib).
"""
import argparse
import json
import math
import os
import sys

DEFAULT = "strict-64-25"
TASK_TITLES = {"fmnist": "Fashion-MNIST, packed as usual (chunk membership random)",
               "sorted": "Fashion-MNIST packed in class order (each chunk one class)",
               "imbalanced": "Imbalanced Fashion-MNIST (Shirt 50 %, nine classes 5.6 % each), "
                             "packed as usual",
               "imbalanced-sorted": "Imbalanced Fashion-MNIST packed in class order"}
CONTROLS = ("sequential", "file-order")


def mean_std(values):
    n = len(values)
    m = sum(values) / n
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    return m, s


def load(out):
    def find(name):  # OUT/name, or OUT/fidelity_name as committed in tests/bench/results/
        for n in (name, "fidelity_" + name):
            if os.path.isfile(os.path.join(out, n)):
                return os.path.join(out, n)
        return None

    def lines(name):
        path = find(name)
        if path is None:
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    runs = lines("runs.jsonl")
    if not runs:
        sys.exit(f"fidelity_report: {out}: no runs (runs.jsonl or fidelity_runs.jsonl)")
    if find("config.json") is None:
        sys.exit(f"fidelity_report: {out}: no config.json or fidelity_config.json")
    with open(find("config.json")) as f:
        config = json.load(f)
    return runs, lines("bench.jsonl"), config


def group(runs, config=None):
    """{task: {order: [runs in seed order]}}, tasks and orders in the order they ran (orders
    as config's orders_of lists them, when it does: a --resume run appends new orders)."""
    out = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        out.setdefault(r["task"], {}).setdefault(r["order"], []).append(r)
    listed = (config or {}).get("orders_of", {})
    for task, orders in out.items():
        rank = {o: i for i, o in enumerate(listed.get(task, []))}
        out[task] = dict(sorted(orders.items(), key=lambda kv: rank.get(kv[0], len(rank))))
    return out


def all_orders(grouped):
    orders = []
    for t in grouped:
        for o in grouped[t]:
            if o not in orders:
                orders.append(o)
    return orders


def imbalanced(task):
    return task.startswith("imbalanced")


def control_of(orders):
    return "file-order" if "file-order" in orders else "sequential"


def welch_t(a, b):
    """Welch's t statistic of mean(a) - mean(b) (how many standard errors apart)."""
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    se = math.sqrt(sa * sa / len(a) + sb * sb / len(b))
    return (ma - mb) / se if se > 0 else float("nan")


def fmt(m, s):
    return f"{m:.4f} ± {s:.4f}"


def finals(rs, key="accuracy"):
    return [r[key][-1] if key == "accuracy" else r[key] for r in rs]


def summary_table(grouped, key="accuracy", only=None):
    tasks = [t for t in grouped if only is None or only(t)]
    head = ["order"] + [f"`{t}`" for t in tasks]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(tasks)]
    for o in all_orders({t: grouped[t] for t in tasks}):
        cells = [f"`{o}`"]
        for t in tasks:
            rs = grouped[t].get(o)
            cells.append(fmt(*mean_std(finals(rs, key))) if rs else "–")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def comparisons(grouped):
    """(task, strict order, other order, metric, Δ, σ, Welch t) for strict-K-M against
    pool-K-M* and recipe-M."""
    out = []
    for task, orders in grouped.items():
        for s in orders:
            if not s.startswith("strict-"):
                continue
            _, k, mem = s.split("-")
            others = [o for o in orders if o.startswith(f"pool-{k}-{mem}")]
            others += [o for o in orders if o == f"recipe-{mem}"]
            metrics = ["accuracy"] + (["minority_recall"] if imbalanced(task) else [])
            for o in others:
                for m in metrics:
                    a, b = finals(orders[s], m), finals(orders[o], m)
                    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
                    sigma = math.sqrt((sa * sa + sb * sb) / 2)
                    out.append({"task": task, "strict": s, "other": o, "metric": m,
                                "delta": ma - mb, "sigma": sigma, "t": welch_t(a, b),
                                "seeds": min(len(a), len(b))})
    return out


def comparison_table(comps):
    head = ["task", "strict", "against", "metric", "Δ = strict − other", "σ (pooled)",
            "Δ / σ", "Welch t", "verdict"]
    rows = ["| " + " | ".join(head) + " |", "|---|---|---|---|" + "---:|" * 4 + "---|"]
    for c in comps:
        z = c["delta"] / c["sigma"] if c["sigma"] > 0 else float("nan")
        verdict = ("n/a (one seed)" if z != z else "**strict better by > 1 σ**" if z > 1 else
                   "**other better by > 1 σ**" if z < -1 else "within 1 σ")
        metric = "accuracy" if c["metric"] == "accuracy" else "minority recall"
        rows.append(f"| `{c['task']}` | `{c['strict']}` | `{c['other']}` | {metric} | "
                    f"{c['delta']:+.4f} | {c['sigma']:.4f} | {z:+.2f} | {c['t']:+.2f} | "
                    f"{verdict} |")
    return rows


def comparison_lines(comps):
    lines = []
    for task in dict.fromkeys(c["task"] for c in comps):
        cs = [c for c in comps if c["task"] == task]
        wins = [c for c in cs if c["sigma"] > 0 and c["delta"] > c["sigma"]]
        losses = [c for c in cs if c["sigma"] > 0 and c["delta"] < -c["sigma"]]

        def name(c):
            m = "" if c["metric"] == "accuracy" else " (minority recall)"
            return (f"`{c['strict']}` vs `{c['other']}`{m} {c['delta']:+.4f} "
                    f"({c['delta'] / c['sigma']:+.1f} σ, t {c['t']:+.1f})")
        lines.append(f"- `{task}`: strict better by > 1 σ: "
                     f"{'; '.join(map(name, wins)) if wins else 'nowhere'}. The other better "
                     f"by > 1 σ: {'; '.join(map(name, losses)) if losses else 'nowhere'}.")
    return lines


def accuracy_table(task, orders):
    perm = orders.get("permutation")
    pm, ps = mean_std(finals(perm)) if perm else (None, None)
    epochs = len(next(iter(orders.values()))[0]["accuracy"])
    head = ["order", "seeds"] + [f"epoch {e + 1}" for e in range(epochs)]
    head += ["Δ final vs permutation"]
    if imbalanced(task):
        head += ["minority recall", "Shirt recall", "worst class recall"]
    head += ["final train loss"]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for order, rs in orders.items():
        cells = [f"`{order}`", str(len(rs))]
        for e in range(epochs):
            cells.append(fmt(*mean_std([r["accuracy"][e] for r in rs])))
        m, _ = mean_std(finals(rs))
        if pm is not None and order != "permutation":
            cells.append(f"{m - pm:+.4f} ({(m - pm) / ps:+.1f} σ)" if ps else f"{m - pm:+.4f}")
        else:
            cells.append("–")
        if imbalanced(task):
            for key in ("minority_recall", "majority_recall", "worst_recall"):
                cells.append(fmt(*mean_std(finals(rs, key))))
        cells.append(fmt(*mean_std([r["train_loss"][-1] for r in rs])))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def frontier_table(grouped, bench, config):
    """One row per order: I/O and randomness figures, batch class share per task."""
    tasks = list(grouped)
    bench_of = {}
    for b in bench:
        bench_of.setdefault(b["order"], b)  # the first task's (the same I/O on each)
    orders = all_orders(grouped)
    epochs = config["epochs"]
    head = ["order", "A / C", "reads per chunk per epoch", "read / delivered",
            "read / delivered (training)", "same-chunk distance",
            "epoch-position correlation", "Spearman vs storage", "storage-neighbour fraction"]
    head += [f"batch class share, `{t}`" for t in tasks]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def fig(rs, key):
        vals = [r[key] for r in rs if r.get(key) is not None]
        return f"{mean_std(vals)[0]:.3f}" if vals else "–"
    for o in orders:
        ref_task = next(t for t in tasks if o in grouped[t])
        ref = grouped[ref_task][o]
        n = config["samples"][ref_task] if isinstance(config.get("samples"), dict) \
            else config["subset"]
        b = bench_of.get(o)
        groups_s = loads_s = amp_s = "–"
        if b is not None and "bench" in b:
            st = b["bench"]
            groups_s = f"{st['abstract_chunks']} / {n // ref[0]['k']}"
            loads_s = f"{st['loads_per_chunk']:.2f}"
            amp_s = f"{st['bytes_read'] / st['bytes_delivered']:.2f}"
        elif b is not None and "recipe" in b:
            rc = b["recipe"]
            groups_s = (f"{rc['workers']} buffers of {rc['buffer_per_worker']}, "
                        f"{rc['shards']} shards")
            loads_s = "1 (one read per shard)"
            amp_s = "1.00"
        elif o == "permutation":
            loads_s, amp_s = "– (per sample)", "1.00"
        elif o in CONTROLS:
            loads_s, amp_s = "1 (sequential)", "1.00"
        stats = [r["stats"] for r in ref if "stats" in r]
        train_s = "–"
        if stats:
            amp = mean_std([s["bytes_read"] / s["bytes_delivered"] for s in stats])
            train_s = f"{amp[0]:.2f}"
        cells = [f"`{o}`", groups_s, loads_s, amp_s, train_s,
                 fig(ref, "same_chunk_distance"), fig(ref, "epoch_position_correlation"),
                 fig(ref, "spearman_storage"), fig(ref, "neighbour_fraction")]
        for t in tasks:
            rs = grouped[t].get(o)
            cells.append(f"{mean_std([r['batch_class_share'] for r in rs])[0]:.3f}" if rs else "–")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def goals(grouped):
    lines = []
    for task, orders in grouped.items():
        perm = orders.get("permutation")
        if not perm:
            continue
        pm, ps = mean_std(finals(perm))
        if DEFAULT in orders:
            f = finals(orders[DEFAULT])
            m, s = mean_std(f)
            ok = abs(m - pm) <= ps
            t = welch_t(f, finals(perm))
            lines.append(f"- `{task}`: `{DEFAULT}` final accuracy {fmt(m, s)} vs permutation "
                         f"{fmt(pm, ps)}: Δ {m - pm:+.4f} = {(m - pm) / ps:+.2f} σ of the "
                         f"permutation (Welch t {t:+.2f}) → {'within' if ok else 'NOT within'} "
                         f"one σ")
        ctl = control_of(orders)
        if ctl in orders:
            m, s = mean_std(finals(orders[ctl]))
            worse = pm - m > 3 * max(ps, s)
            lines.append(f"- `{task}`: control `{ctl}` {fmt(m, s)}: "
                         f"{'clearly worse' if worse else 'NOT clearly worse'} "
                         f"({(pm - m) / ps:.0f} σ below the permutation)")
        beyond = []
        for o, rs in orders.items():
            if o in ("permutation",) + CONTROLS:
                continue
            m, _ = mean_std(finals(rs))
            if abs(m - pm) > ps:
                beyond.append(f"`{o}` {m - pm:+.4f} ({(m - pm) / ps:+.1f} σ)")
        lines.append(f"- `{task}`: orders whose mean final accuracy is more than one σ of the "
                     f"permutation from the permutation's: "
                     f"{', '.join(beyond) if beyond else 'none'}")
        same = {o: all(r["same_order_as_hdmlp_bench"] for r in rs
                       if "same_order_as_hdmlp_bench" in r)
                for o, rs in orders.items() if any("same_order_as_hdmlp_bench" in r for r in rs)}
        if same:
            lines.append(f"- `{task}`: hdmlp.torch delivered the same order as hdmlp-bench "
                         f"--ids: " + ", ".join(f"`{o}` {'yes' if v else 'NO'}"
                                                for o, v in same.items()))
    return lines


def plot(grouped, config, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = list(grouped)
    fig, axes = plt.subplots(len(tasks), 3, figsize=(16, 4.2 * len(tasks)), squeeze=False)
    for row, task in enumerate(tasks):
        orders = grouped[task]
        perm_final = finals(orders.get("permutation", []))
        strict = [o for o in orders if o.startswith("strict-") and o != DEFAULT]
        worst = min(strict, key=lambda o: mean_std(finals(orders[o]))[0]) if strict else None
        shown = [o for o in ("permutation", DEFAULT, "pool-64-25", "pool-64-25-r1",
                             "recipe-25", worst) if o and o in orders]
        ax_acc, ax_final, ax_third = axes[row]
        for o in shown:
            rs = orders[o]
            ep = list(range(1, len(rs[0]["accuracy"]) + 1))
            ms = [mean_std([r["accuracy"][e] for r in rs]) for e in range(len(ep))]
            ax_acc.errorbar(ep, [a for a, _ in ms], yerr=[b if b == b else 0.0 for _, b in ms],
                            capsize=3, marker="o", label=o)
        ax_acc.set_title(f"{task}: test accuracy (mean ± std, {len(perm_final)} seeds)",
                         fontsize=10)
        ax_acc.xaxis.get_major_locator().set_params(integer=True)
        ax_acc.set_xlabel("epoch")
        if perm_final:
            ax_acc.set_ylim(mean_std(perm_final)[0] - 0.12, None)
        ax_acc.legend(fontsize=8)
        ax_acc.grid(alpha=0.3)
        names = [o for o in orders if o not in CONTROLS]

        def per_order(ax, key, title):
            vals = [mean_std(finals(orders[o], key)) for o in names]
            colors = ["C3" if o.startswith("strict") else "C0" if o.startswith("pool") else
                      "C2" if o.startswith("recipe") else "k" for o in names]
            for i, ((m, s), c) in enumerate(zip(vals, colors)):
                ax.errorbar([m], [i], xerr=[s if s == s else 0.0], fmt="o", capsize=3, color=c)
            if "permutation" in orders:
                pm, ps = mean_std(finals(orders["permutation"], key))
                ax.axvspan(pm - ps, pm + ps, color="grey", alpha=0.25,
                           label="permutation ± 1 std")
                ax.legend(fontsize=8, loc="lower left")
            ax.set_yticks(range(len(names)))
            ax.set_yticklabels(names, fontsize=8)
            ax.invert_yaxis()
            ax.set_title(title, fontsize=10)
            ax.grid(alpha=0.3)
        per_order(ax_final, "accuracy",
                  f"{task}: final test accuracy, mean ± std (controls left out)")
        if imbalanced(task):
            per_order(ax_third, "minority_recall",
                      f"{task}: minority classes' mean recall, mean ± std")
        else:
            spe = config["samples"][task] // config["batch"] \
                if isinstance(config.get("samples"), dict) else config["subset"] // config["batch"]
            for o in shown:
                rs = orders[o]
                w = rs[0]["loss_window"]
                pts = min(len(r["loss_curve"]) for r in rs)
                x = [(i + 1) * w / spe for i in range(pts)]
                ax_third.plot(x, [mean_std([r["loss_curve"][i] for r in rs])[0]
                                  for i in range(pts)], label=o)
            ax_third.set_title(f"{task}: training loss (mean over seeds)", fontsize=10)
            ax_third.set_xlabel("epoch")
            ax_third.set_yscale("log")
            ax_third.legend(fontsize=8)
            ax_third.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="fidelity_bench.py --out directory")
    ap.add_argument("--md", default=None, help="also write the tables to this file")
    ap.add_argument("--png", default=None, help="plot file (needs matplotlib)")
    args = ap.parse_args()
    runs, bench, config = load(args.out)
    grouped = group(runs, config)
    seconds = sum(r["seconds"] for r in runs)
    seeds = sorted({r["seed"] for r in runs})
    samples = config.get("samples", {})
    lines = [f"Fidelity benchmark: {config['epochs']} epochs, seeds {seeds[0]}..{seeds[-1]}, "
             f"{config['model']}; training images "
             + ", ".join(f"`{t}` {n}" for t, n in samples.items())
             + f"; test split {config['test_samples']} (balanced, so accuracy = balanced "
             f"accuracy); torch {config['torch']}, hdmlp {config['hdmlp']}, BLAS "
             f"{', '.join(os.path.basename(b) for b in config.get('blas', [])) or '?'}; "
             f"{len(runs)} runs, {seconds / 60:.1f} min of training.", "",
             "Orders: `strict-K-M` = hdmlp strict, chunks of K, memory M %; `pool-K-M` = hdmlp "
             "pool order at pool_reads "
             + " / ".join(f"{r} (K = {k})" for k, r in config.get("pool_reads_default", {}).items())
             + " (what auto picks for chunks of K ImageNet-size samples), `-rR` = R reads per "
             "chunk per epoch; `recipe-M` = the shard recipe's order (2 workers, shuffle "
             "buffers holding M % in total; shards written in class order in the "
             "class-ordered tasks); `sequential` / `file-order` = controls.", "",
             "### Final test accuracy (mean ± sample std over seeds)", ""]
    lines += summary_table(grouped) + [""]
    if any(imbalanced(t) for t in grouped):
        lines += ["Imbalanced tasks, the nine minority classes' mean recall on the test split:",
                  ""]
        lines += summary_table(grouped, "minority_recall", imbalanced) + [""]
    comps = comparisons(grouped)
    lines += ["### Strict against pool and the shard recipe at the same memory", "",
              "Δ = strict's mean final figure − the other's; σ = root mean square of the two "
              "orders' sample stds over seeds; verdict at |Δ| > σ.", ""]
    lines += comparison_lines(comps) + [""] + comparison_table(comps) + [""]
    for task, orders in grouped.items():
        lines += [f"### {TASK_TITLES.get(task, task)} (`{task}`)", "",
                  "Test accuracy after each epoch (mean ± sample std over seeds):", ""]
        lines += accuracy_table(task, orders) + [""]
    lines += ["### Frontier: I/O against randomness", "",
              "A / C: abstract chunks (memory) / chunks. Reads per chunk per epoch and "
              "read / delivered from hdmlp-bench --json (first seed, first task; strict with "
              "whole-chunk refills: the cost where storage operations dominate). Read / "
              "delivered (training): hdmlp.torch's stats in the training runs (strict: refill "
              "auto over reads served by the page cache; pool: the first epoch's read-ahead "
              "into the next included). Randomness figures (order_figures.py) from the "
              "delivered orders of the first task that ran the order, in storage positions "
              "(for the recipe: of its shards): same-chunk distance (K of the order; 1 = a "
              "permutation), epoch-position correlation, Spearman of delivery against storage "
              "position, fraction of consecutive deliveries within K in storage. Batch class "
              "share: the mean share of a batch's most frequent class.", ""]
    lines += frontier_table(grouped, bench, config) + [""]
    lines += ["### Goals (issue 14)", ""] + goals(grouped) + [""]
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    if args.png:
        plot(grouped, config, args.png)


if __name__ == "__main__":
    main()
