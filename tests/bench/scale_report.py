#!/usr/bin/env python3
"""The report of scale_bench.sh (issue 27): table, per-sample slopes, extrapolation.

    scale_report.py RUNS.jsonl [--meta JSON] [--json OUT] [--to "100000000 1000000000"]

RUNS.jsonl holds one line per sample count (scale_bench.sh). Prints the table of the
measured counts, then for each quantity the least-squares line over the counts (slope per
sample and intercept; with one count, the line through zero) and its value at each count
of --to. Writes {meta, runs (with the derived figures), fits, extrapolation, notes} to
--json. Standard library only.
"""
import argparse
import json
import math
import sys

MIB = 1 << 20
KEYS_MAX = (1 << 32) - 1  # a format-1 index's strings section (keys + label names): 4 GiB


def derive(r):
    """The figures the table shows, from one run's record."""
    n = r["samples"]
    ld = r["loader"]
    rss0 = ld["rss"]["start"]
    anon = (ld["peak_anon_kib"] - rss0["anon_kib"]) * 1024
    mapped = (ld["peak_file_kib"] - rss0["file_kib"]) * 1024
    planned = r.get("plan_s") is not None  # left out with --loader-samples
    scale = r["plan_epochs_target"] / r["plan_epochs_run"] if planned else None
    half = r.get("loader_half_budget")
    per_budget = None
    if half is not None:
        anon_half = (half["peak_anon_kib"] - half["rss"]["start"]["anon_kib"]) * 1024
        per_budget = (anon - anon_half) / (r["memory"] - half["memory"])
    return {
        "samples": n,
        "pack_s": r["pack_s"],
        "pack_cpu_s": r["pack_user_s"] + r["pack_sys_s"],
        "pack_rss_bytes": r["pack_rss_kib"] * 1024,
        "index_bytes": r["index_bytes"],
        "segment_bytes": r["segment_bytes"],
        "open_s": ld["open_s"],
        "create_s": ld["create_s"],
        "ttfb_s": ld["ttfb_s"],
        "epoch_s": None if ld.get("partial") else ld["epoch_s"],  # a partial run's is not one
        "samples_per_s": ld["samples_per_s"],
        "anon_bytes": anon,
        "mapped_bytes": mapped,
        "anon_outside_budget_bytes": anon - r["memory"],
        "anon_per_budget_byte": per_budget,
        "anon_at_create_bytes": (ld["rss"]["create"]["anon_kib"] - rss0["anon_kib"]) * 1024,
        "data_fits_budget": n * r["sample_size"] <= r["memory"],
        "bench_peak_rss_bytes": r["bench_peak_rss_bytes"],
        "bench_samples_per_s": r["bench_samples_per_s"],
        "plan_s": r["plan_s"] * scale if planned else None,
        "plan_cpu_s": r["plan_cpu_s"] * scale if planned else None,
        "plan_rss_bytes": r["plan_rss_kib"] * 1024 if planned else None,
    }


# quantity -> (label, "s" or "B")
FITTED = {
    "pack_s": ("pack time", "s"),
    "pack_cpu_s": ("pack CPU (user + sys)", "s"),
    "pack_rss_bytes": ("packer peak RSS", "B"),
    "index_bytes": ("index file", "B"),
    "segment_bytes": ("segment files", "B"),
    "open_s": ("loader open (hdmlp_dataset_open)", "s"),
    "ttfb_s": ("time to first batch (open + create + first batch)", "s"),
    "epoch_s": ("one epoch (create to last batch)", "s"),
    "anon_bytes": ("loader anonymous RSS", "B"),
    "anon_at_create_bytes": ("loader anonymous RSS after create", "B"),
    "mapped_bytes": ("loader file-mapped RSS", "B"),
    "bench_peak_rss_bytes": ("hdmlp-bench peak RSS", "B"),
    "plan_s": ("forecast time", "s"),
    "plan_cpu_s": ("forecast CPU (user + sys)", "s"),
    "plan_rss_bytes": ("forecast peak RSS", "B"),
}


def fmt_bytes(v):
    """MiB below 10 GiB, else GiB (binary units, as RSS is usually read)."""
    if abs(v) < 10 * (1 << 30):
        return "%.0f MiB" % (v / MIB) if abs(v) >= 10 * MIB else "%.1f MiB" % (v / MIB)
    return "%.1f GiB" % (v / (1 << 30))


def fmt_secs(v):
    if abs(v) < 10:
        return "%.3f s" % v
    if abs(v) < 3600:
        return "%.0f s" % v
    return "%.0f s (%.1f h)" % (v, v / 3600)


def fit(xs, ys):
    """Least-squares line y = a + b x; through zero with one point."""
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0]
    mx = sum(xs) / len(xs)
    my = sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def exponent(xs, ys):
    """b of y = c N^b by least squares on logs (None with one point or a value <= 0)."""
    if len(xs) < 2 or min(ys) <= 0:
        return None
    a0, b = fit([math.log(x) for x in xs], [math.log(y) for y in ys])
    return b


def fmt_n(n):
    for div, suffix in ((10**9, " B"), (10**6, " M"), (10**3, " k")):
        if n >= div and n % (div // 10) == 0:
            v = n / div
            return ("%g" % v) + suffix
    return "{:,}".format(n)


def key_len(n):
    """Bytes of the member names scale_gen.py writes for n samples."""
    return len("class_00/") + max(8, len(str(n - 1))) + len(".bin")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs")
    ap.add_argument("--meta", default="{}")
    ap.add_argument("--json")
    ap.add_argument("--to", default="100000000 1000000000")
    a = ap.parse_args()
    meta = json.loads(a.meta)
    runs = [json.loads(line) for line in open(a.runs) if line.strip()]
    if not runs:
        sys.exit("scale_report: no runs in %s" % a.runs)
    target = meta.get("plan_epochs", 90)
    for r in runs:
        r["plan_epochs_target"] = target
    runs.sort(key=lambda r: r["samples"])
    d = [derive(r) for r in runs]

    out = sys.stdout
    out.write("Scale benchmark (issue 27): %d B samples, %d classes, K = %d, budget %d MiB, "
              "batch 32, 2 I/O threads\n" % (runs[0]["sample_size"], runs[0]["classes"],
                                               runs[0]["chunk_size"], runs[0]["memory"] // MIB))
    out.write("host: %s, %s CPUs, git %s; the machine is shared: load (1/5/15 min) is given "
              "per run\n\n" % (meta.get("kernel", "?"), meta.get("cpus", "?"), meta.get("git", "?")))
    head = ("| N | pack s (CPU) | packer RSS MiB | index MB | index B/smp | open s | first batch s "
            "| samples/s | anon MiB | anon out of budget B/smp | mapped MiB | mapped B/smp "
            "| hdmlp-bench RSS MiB | forecast %d ep s (CPU) | load (pack / loader / forecast) |" % target)
    out.write(head + "\n|" + "---:|" * (head.count("|") - 2) + "---|\n")
    for r, x in zip(runs, d):
        n = x["samples"]
        plan = "%.1f (%.1f)" % (x["plan_s"], x["plan_cpu_s"]) if x["plan_s"] is not None else "–"
        if r["loader"].get("partial"):
            plan += "; loader: first %s samples" % "{:,}".format(r["loader"]["samples_taken"])
        if r["plan_extrapolated"]:
            plan += ", %d ep × %.1f" % (r["plan_epochs_run"], target / r["plan_epochs_run"])
        bench_rss = x["bench_peak_rss_bytes"]
        out.write("| %s | %.1f (%.1f) | %.0f | %.1f | %.1f | %.3f | %.3f | %s | %.0f | %.1f | %.0f | %.1f "
                  "| %s | %s | %s / %s / %s |\n" % (
                      "{:,}".format(n), x["pack_s"], x["pack_cpu_s"], x["pack_rss_bytes"] / MIB,
                      x["index_bytes"] / 1e6, x["index_bytes"] / n, x["open_s"], x["ttfb_s"],
                      "{:,.0f}".format(x["samples_per_s"]), x["anon_bytes"] / MIB,
                      x["anon_outside_budget_bytes"] / n, x["mapped_bytes"] / MIB,
                      x["mapped_bytes"] / n,
                      "%.0f" % (bench_rss / MIB) if bench_rss is not None else "–", plan,
                      r["load"]["pack"].split()[0], r["load"]["loader"].split()[0],
                      r["load"]["plan"].split()[0]))

    xs = [x["samples"] for x in d]
    tos = [int(t) for t in a.to.split()]
    fits = {}
    extra = {str(t): {} for t in tos}
    out.write("\nPer-sample slopes (least squares over N = %s) and extrapolation:\n\n"
              % ", ".join(fmt_n(n) for n in xs))
    head = "| quantity | slope per sample | intercept | exponent | " + " | ".join(
        "at %s" % fmt_n(t) for t in tos) + " |"
    out.write(head + "\n|---|" + "---:|" * (head.count("|") - 2) + "\n")
    steeper = []
    for key, (label, unit) in FITTED.items():
        pts = [(x["samples"], x[key]) for x in d if x[key] is not None]
        if not pts:
            continue
        kx, ys = [p[0] for p in pts], [p[1] for p in pts]
        a0, b = fit(kx, ys)
        p = exponent(kx, ys)
        fits[key] = {"slope_per_sample": b, "intercept": a0, "exponent": p}
        show = fmt_secs if unit == "s" else fmt_bytes
        slope = ("%.3g µs" % (b * 1e6)) if unit == "s" else ("%.3g B" % b)
        vals = []
        for t in tos:
            v = a0 + b * t
            extra[str(t)][key] = v
            vals.append(show(v))
        out.write("| %s | %s | %s | %s | %s |\n" % (label, slope, show(a0),
                                                   "%.2f" % p if p is not None else "–",
                                                   " | ".join(vals)))
        if p is not None and p > 1.1:
            # y = c N^p through the largest count
            c = ys[-1] / kx[-1] ** p
            steeper.append("%s grows as N^%.2f: at %s" % (label, p, ", ".join(
                "%s %s" % (fmt_n(t), show(c * t ** p)) for t in tos)))
            for t in tos:
                extra[str(t)][key + "_power_law"] = c * t ** p
    out.write("\n(exponent: b of a power law c N^b fitted to the same points; 1 = linear.)\n")
    if steeper:
        out.write("Superlinear, extrapolated with the power law instead (through the largest "
                  "count):\n" + "".join("- %s\n" % t for t in steeper))
    for t in tos:
        e = extra[str(t)]
        e["samples_per_s"] = t / e["epoch_s"] if e.get("epoch_s", 0) > 0 else None
    if all(extra[str(t)]["samples_per_s"] is not None for t in tos):
        out.write("\nsamples/s over one epoch, extrapolated: %s\n" % ", ".join(
            "%s: %s" % (fmt_n(t), "{:,.0f}".format(extra[str(t)]["samples_per_s"])) for t in tos))

    per_budget = [x["anon_per_budget_byte"] for x in d if x["anon_per_budget_byte"] is not None]
    if per_budget:
        mean = runs[0]["sample_size"]
        out.write("loader anonymous RSS per byte of budget (full against half budget): %s; "
                  "with %d B samples that is %s B of resident memory per budgeted sample\n" % (
                      ", ".join("%.2f" % v for v in per_budget), mean,
                      ", ".join("%.0f" % (v * mean) for v in per_budget)))
    notes = []
    for x in d:
        if x["data_fits_budget"]:
            notes.append("N = %s: the data fits in the budget, so the loader holds every "
                         "sample and its memory grows with N through the budget's share; "
                         "the slopes describe large N only between counts whose data "
                         "exceeds the budget" % fmt_n(x["samples"]))
    for t in tos:
        kl = key_len(t)
        if kl * t > KEYS_MAX and all(r.get("tables_bytes", 0) == 0 for r in runs):
            notes.append(
                "N = %s: the keys scale_gen.py writes (%d B each, %.1f GB) exceed a format-1 "
                "index's 4 GiB strings section (format 2 keeps them in DIR/keys, unbounded)"
                % (fmt_n(t), kl, kl * t / 1e9))
        mem_total = meta.get("mem_total_kib", 0) * 1024
        if mem_total and extra[str(t)]["index_bytes"] > mem_total:
            notes.append("N = %s: the index (%.0f GB, mapped and touched whole at open) is "
                         "larger than this machine's memory (%.0f GB)" % (
                             fmt_n(t), extra[str(t)]["index_bytes"] / 1e9, mem_total / 1e9))
    if notes:
        out.write("\nNotes:\n" + "".join("- %s\n" % s for s in notes))

    if a.json:
        res = {"meta": meta, "runs": [dict(r, derived=x) for r, x in zip(runs, d)],
               "fits": fits, "extrapolation": extra, "notes": notes}
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
