#!/usr/bin/python3
"""Tables and plot of a fidelity_bench.py run (issue 14).

    tests/bench/fidelity_report.py OUT [--md FILE] [--png FILE]

Reads OUT/runs.jsonl, OUT/bench.jsonl and OUT/config.json (or fidelity_*.jsonl/json: the
copies committed in tests/bench/results/). Prints (and writes to --md) per
task the test accuracy after each epoch as mean ± sample standard deviation over seeds and
the final training loss; the frontier (bytes read, chunk loads, same-chunk distance, batch
class share: the mean share of a batch's most frequent class, accuracy) per order; and the goals: hdmlp strict at the defaults (K = 64,
25 %) within one standard deviation of the permutation's mean final accuracy, the
control clearly worse (its mean more than 3 standard deviations below). --png draws the
accuracy and loss curves and the final accuracy per order (matplotlib).
"""
import argparse
import json
import math
import os
import sys

DEFAULT = "strict-64-25"
TASK_TITLES = {"fmnist": "Fashion-MNIST, packed as usual (chunk membership random)",
               "sorted": "Fashion-MNIST packed in class order (each chunk one class)"}


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


def group(runs):
    """{task: {order: [runs in seed order]}}, orders in the order they ran."""
    out = {}
    for r in runs:
        out.setdefault(r["task"], {}).setdefault(r["order"], []).append(r)
    for orders in out.values():
        for rs in orders.values():
            rs.sort(key=lambda r: r["seed"])
    return out


def control_of(orders):
    return "file-order" if "file-order" in orders else "sequential"


def welch_t(a, b):
    """Welch's t statistic of mean(a) - mean(b) (how many standard errors apart)."""
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    se = math.sqrt(sa * sa / len(a) + sb * sb / len(b))
    return (ma - mb) / se if se > 0 else float("nan")


def fmt(m, s):
    return f"{m:.4f} ± {s:.4f}"


def accuracy_table(task, orders):
    perm = orders.get("permutation")
    pm, ps = mean_std([r["accuracy"][-1] for r in perm]) if perm else (None, None)
    epochs = len(next(iter(orders.values()))[0]["accuracy"])
    head = ["order", "seeds"] + [f"epoch {e + 1}" for e in range(epochs)]
    head += ["Δ final vs permutation", "final train loss"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (epochs + 2)]
    for order, rs in orders.items():
        cells = [f"`{order}`", str(len(rs))]
        for e in range(epochs):
            cells.append(fmt(*mean_std([r["accuracy"][e] for r in rs])))
        m, _ = mean_std([r["accuracy"][-1] for r in rs])
        if pm is not None and order != "permutation":
            cells.append(f"{m - pm:+.4f} ({(m - pm) / ps:+.1f} σ)" if ps else f"{m - pm:+.4f}")
        else:
            cells.append("–")
        cells.append(fmt(*mean_std([r["train_loss"][-1] for r in rs])))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def frontier_table(grouped, bench, config):
    """One row per order: I/O and randomness figures, accuracy on each task."""
    tasks = list(grouped)
    bench_of = {(b["task"], b["order"]): b["bench"] for b in bench}
    orders = []
    for t in tasks:
        for o in grouped[t]:
            if o not in orders:
                orders.append(o)
    epochs = config["epochs"]
    n = config["subset"]
    head = ["order", "A / C", "read / delivered (training, refill auto)",
            "chunk loads per chunk per epoch", "read / delivered, whole-chunk refills",
            "same-chunk distance"]
    head += [f"batch class share, {t}" for t in tasks]
    head += [f"final accuracy, {t}" for t in tasks]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for o in orders:
        ref = next(grouped[t][o] for t in tasks if o in grouped[t])
        stats = [r["stats"] for r in ref if "stats" in r]
        if stats:
            amp = mean_std([s["bytes_read"] / s["bytes_delivered"] for s in stats])
            loads = mean_std([s["chunk_loads"] / (n / ref[0]["k"]) / epochs for s in stats])
            amp_s, loads_s = f"{amp[0]:.2f} ± {amp[1]:.2f}", f"{loads[0]:.2f}"
        elif o.startswith("relaxed"):
            b = next((bench_of[(t, o)] for t in tasks if (t, o) in bench_of), None)
            amp_s = "1.00 (one load per chunk)" if b is None else \
                f"{b['bytes_read'] / b['bytes_delivered']:.2f} (hdmlp-bench)"
            loads_s = "1.00" if b is None else f"{b['loads_per_chunk']:.2f} (hdmlp-bench)"
        else:
            amp_s = loads_s = "1.00 (per sample)" if o == "permutation" else "1.00 (sequential)"
            loads_s = "–"
        whole = next((bench_of[(t, o)] for t in tasks if (t, o) in bench_of), None)
        whole_s = f"{whole['bytes_read'] / whole['bytes_delivered']:.2f}" if whole else "–"
        groups_s = f"{whole['abstract_chunks']} / {n // ref[0]['k']}" if whole else "–"
        scd = mean_std([r["same_chunk_distance"] for r in ref])[0]
        cells = [f"`{o}`", groups_s, amp_s, loads_s, whole_s, f"{scd:.3f}"]
        for t in tasks:
            rs = grouped[t].get(o)
            cells.append(f"{mean_std([r['batch_class_share'] for r in rs])[0]:.3f}" if rs else "–")
        for t in tasks:
            rs = grouped[t].get(o)
            cells.append(fmt(*mean_std([r["accuracy"][-1] for r in rs])) if rs else "–")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def goals(grouped):
    lines = []
    for task, orders in grouped.items():
        perm = orders.get("permutation")
        if not perm:
            continue
        pm, ps = mean_std([r["accuracy"][-1] for r in perm])
        if DEFAULT in orders:
            finals = [r["accuracy"][-1] for r in orders[DEFAULT]]
            m, s = mean_std(finals)
            ok = abs(m - pm) <= ps
            t = welch_t(finals, [r["accuracy"][-1] for r in perm])
            lines.append(f"- {task}: `{DEFAULT}` final accuracy {fmt(m, s)} vs permutation "
                         f"{fmt(pm, ps)}: Δ {m - pm:+.4f} = {(m - pm) / ps:+.2f} σ of the "
                         f"permutation (Welch t {t:+.2f}) → {'within' if ok else 'NOT within'} "
                         f"one σ")
        ctl = control_of(orders)
        if ctl in orders:
            m, s = mean_std([r["accuracy"][-1] for r in orders[ctl]])
            worse = pm - m > 3 * max(ps, s)
            lines.append(f"- {task}: control `{ctl}` {fmt(m, s)}: "
                         f"{'clearly worse' if worse else 'NOT clearly worse'} "
                         f"({(pm - m) / ps:.0f} σ below the permutation)")
        beyond = []
        for o, rs in orders.items():
            if o in ("permutation", ctl):
                continue
            m, _ = mean_std([r["accuracy"][-1] for r in rs])
            if abs(m - pm) > ps:
                beyond.append(f"`{o}` {m - pm:+.4f}")
        lines.append(f"- {task}: orders whose mean final accuracy is more than one σ from the "
                     f"permutation's: {', '.join(beyond) if beyond else 'none'}")
        same = [r["same_order_as_hdmlp_bench"] for rs in orders.values() for r in rs
                if "same_order_as_hdmlp_bench" in r]
        if same:
            lines.append(f"- {task}: hdmlp.torch delivered the same order as hdmlp-bench "
                         f"--ids for `{DEFAULT}`: {'yes' if all(same) else 'NO'}")
    return lines


def plot(grouped, config, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = list(grouped)
    fig, axes = plt.subplots(len(tasks), 3, figsize=(15, 4.2 * len(tasks)), squeeze=False)
    for row, task in enumerate(tasks):
        orders = grouped[task]
        perm_final = [r["accuracy"][-1] for r in orders.get("permutation", [])]
        worst = None
        strict = [o for o in orders if o.startswith("strict-") and o != DEFAULT]
        if strict:
            worst = min(strict, key=lambda o: mean_std([r["accuracy"][-1] for r in orders[o]])[0])
        shown = [o for o in ("permutation", DEFAULT, worst, "relaxed-64-25", "sequential",
                             "file-order") if o and o in orders]
        ax_acc, ax_loss, ax_final = axes[row]
        for o in shown:
            rs = orders[o]
            ep = list(range(1, len(rs[0]["accuracy"]) + 1))
            ms = [mean_std([r["accuracy"][e] for r in rs]) for e in range(len(ep))]
            m = [a for a, _ in ms]
            s = [b if b == b else 0.0 for _, b in ms]  # one seed: no std
            ax_acc.errorbar(ep, m, yerr=s, capsize=3, marker="o", label=o)
            spe = config["subset"] // config["batch"]
            w = rs[0]["loss_window"]
            pts = min(len(r["loss_curve"]) for r in rs)
            x = [(i + 1) * w / spe for i in range(pts)]
            ax_loss.plot(x, [mean_std([r["loss_curve"][i] for r in rs])[0] for i in range(pts)],
                         label=o)
        ax_acc.set_title(f"{task}: test accuracy (mean ± std, {len(perm_final)} seeds)",
                         fontsize=10)
        ax_acc.xaxis.get_major_locator().set_params(integer=True)
        ax_acc.set_xlabel("epoch")
        low = min(mean_std([r["accuracy"][-1] for r in orders["permutation"]])[0] - 0.08, 0.9) \
            if perm_final else 0
        ax_acc.set_ylim(low, None)
        ax_acc.legend(fontsize=8, title="controls may be below the axis", title_fontsize=7)
        ax_acc.grid(alpha=0.3)
        ax_loss.set_title(f"{task}: training loss (mean over seeds)", fontsize=10)
        ax_loss.set_xlabel("epoch")
        ax_loss.set_yscale("log")
        ax_loss.legend(fontsize=8)
        ax_loss.grid(alpha=0.3)
        names = [o for o in orders if o not in ("sequential", "file-order")]
        finals = [mean_std([r["accuracy"][-1] for r in orders[o]]) for o in names]
        ax_final.errorbar([m for m, _ in finals], range(len(names)),
                          xerr=[s if s == s else 0.0 for _, s in finals], fmt="o", capsize=3)
        if perm_final:
            pm, ps = mean_std(perm_final)
            ax_final.axvspan(pm - ps, pm + ps, color="grey", alpha=0.25,
                             label="permutation ± 1 std")
            ax_final.legend(fontsize=8, loc="lower left")
        ax_final.set_yticks(range(len(names)))
        ax_final.set_yticklabels(names, fontsize=8)
        ax_final.invert_yaxis()
        ax_final.set_title(f"{task}: final test accuracy, mean ± std (controls left out)",
                           fontsize=10)
        ax_final.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="fidelity_bench.py --out directory")
    ap.add_argument("--md", default=None, help="also write the tables to this file")
    ap.add_argument("--png", default=None, help="plot file (needs matplotlib)")
    args = ap.parse_args()
    runs, bench, config = load(args.out)
    grouped = group(runs)
    seconds = sum(r["seconds"] for r in runs)
    lines = [f"Fidelity benchmark: {config['subset']} training images "
             f"({config['per_class']} per class), test split {config['test_samples']}, "
             f"{config['epochs']} epochs, seeds {config['seed0']}..{config['seed0'] + config['seeds'] - 1}, "
             f"{config['model']}; torch {config['torch']}, hdmlp {config['hdmlp']}; "
             f"{len(runs)} runs, {seconds / 60:.1f} min of training.", ""]
    for task, orders in grouped.items():
        lines += [f"### {TASK_TITLES.get(task, task)} (`{task}`)", "",
                  "Test accuracy after each epoch (mean ± sample std over seeds):", ""]
        lines += accuracy_table(task, orders) + [""]
    lines += ["### Frontier: I/O against randomness against accuracy", "",
              "A / C: abstract chunks (memory) / chunks; bytes in the training runs come "
              "from the loader's stats (refill auto, its cost model learnt from reads served "
              "by the page cache, so they vary run to run); chunk loads and whole-chunk "
              "read amplification (the cost where storage operations dominate) from "
              "hdmlp-bench --refill whole for the first seed; same-chunk distance from the "
              "delivered indices (1.0 = a permutation); batch class share: the mean share "
              "of a batch's most frequent class (0.165 for a permutation here). The "
              "permutation's runs are the same in both tasks (the files do not change).", ""]
    lines += frontier_table(grouped, bench, config) + [""]
    lines += ["### Goals", ""] + goals(grouped) + [""]
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    if args.png:
        plot(grouped, config, args.png)


if __name__ == "__main__":
    main()
