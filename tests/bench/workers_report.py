#!/usr/bin/python3
"""Table of workers_bench.sh's results: workers_report.py OUT/results.jsonl

Per regime and W (medians over the rounds): epoch seconds of hdmlp and of ImageFolder, the
ratio ImageFolder / hdmlp, hdmlp's samples/s, hdmlp's bytes read (its own count,
ds.stats()["bytes_read"]) and that against W = 0, the bytes the cell read from the disk
(blkio: every process of the cell) for both, and the same for hdmlp-fixed (the regime's
true cost model instead of the learnt one) when it ran. Then the goals: hdmlp's bytes at
every W <= 1.05 x W = 0; regime A: hdmlp >= 2.5 x faster than ImageFolder at every W.
Exit status 1 when a run failed.
"""
import json
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    meta = next((r["meta"] for r in rows if "meta" in r), {})
    rows = [r for r in rows if "meta" not in r]
    failed = [r for r in rows if r["cell"]["rc"] != 0 or not r.get("result")]
    for r in failed:
        print(f"FAILED: regime {r['regime']} W={r['workers']} {r['who']} round {r['round']}: "
              f"rc {r['cell']['rc']}, oom kills {r['cell']['oom_kills']}")
    ok_rows = [r for r in rows if r not in failed]
    runs = {}
    for r in ok_rows:
        runs.setdefault((r["regime"], r["workers"], r["who"]), []).append(r)

    def m(regime, w, who, f):
        return med([f(r) for r in runs.get((regime, w, who), [])])

    wall = lambda r: r["result"]["wall"]                     # noqa: E731
    disk = lambda r: r["cell"]["dev_read_bytes"]             # noqa: E731
    own = lambda r: r["result"].get("bytes_read")            # noqa: E731
    limit = lambda r: r["cell"]["memory_limit"]              # noqa: E731
    peak = lambda r: r["cell"]["peak_memory"]                # noqa: E731
    samples = lambda r: r["result"]["samples"] / r["result"]["wall"]  # noqa: E731
    workers = sorted({r["workers"] for r in rows})
    has_fixed = any(r["who"] == "hdmlp-fixed" for r in rows)
    if meta:
        print(f"{meta.get('count')} JPEGs, {meta.get('raw_bytes', 0) / 1e6:.1f} MB "
              f"(mean {meta.get('raw_bytes', 0) / max(1, meta.get('count', 1)) / 1024:.1f} KiB), "
              f"rev {meta.get('rev')}, {meta.get('repeat')} round(s), medians; MB = 10^6 B")
    head = (f"{'reg':3} {'W':>2} {'hdmlp s':>8} {'IF s':>7} {'IF/hdmlp':>8} {'smp/s':>6} "
            f"{'hd read MB':>10} {'vs W0':>6} {'hd disk MB':>10} {'IF disk MB':>10} "
            f"{'limit MiB hd/IF':>15} {'peak MiB hd/IF':>14}")
    if has_fixed:
        head += f" | {'fixed s':>7} {'read MB':>8} {'vs W0':>6} {'disk MB':>8}"
    print(head)
    goal_bytes, goal_speed = [], []
    for regime in ("A", "B"):
        base = base_fixed = None
        for w in workers:
            hs, fs = m(regime, w, "hdmlp", wall), m(regime, w, "imagefolder", wall)
            if hs is None or fs is None:
                print(f"{regime:3} {w:>2} (no complete runs)")
                continue
            hb = m(regime, w, "hdmlp", own)
            if w == 0:
                base = hb
            vs = hb / base if hb and base else None
            line = (f"{regime:3} {w:>2} {hs:8.2f} {fs:7.2f} {fs / hs:7.2f}x "
                    f"{m(regime, w, 'hdmlp', samples):6.0f} {hb / 1e6:10.1f} "
                    f"{vs if vs is None else f'{vs:.3f}':>6} "
                    f"{m(regime, w, 'hdmlp', disk) / 1e6:10.1f} "
                    f"{m(regime, w, 'imagefolder', disk) / 1e6:10.1f} "
                    f"{m(regime, w, 'hdmlp', limit) / 2**20:9.0f}/"
                    f"{m(regime, w, 'imagefolder', limit) / 2**20:<5.0f} "
                    f"{m(regime, w, 'hdmlp', peak) / 2**20:8.0f}/"
                    f"{m(regime, w, 'imagefolder', peak) / 2**20:<5.0f}")
            if has_fixed and (regime, w, "hdmlp-fixed") in runs:
                xs, xb = m(regime, w, "hdmlp-fixed", wall), m(regime, w, "hdmlp-fixed", own)
                if w == 0:
                    base_fixed = xb
                xv = xb / base_fixed if base_fixed else None
                line += (f" | {xs:7.2f} {xb / 1e6:8.1f} {xv if xv is None else f'{xv:.3f}':>6} "
                         f"{m(regime, w, 'hdmlp-fixed', disk) / 1e6:8.1f}")
            print(line)
            if w != 0 and vs is not None:
                goal_bytes.append((regime, w, vs))
            if regime == "A":
                goal_speed.append((w, fs / hs))
    print("columns: hd read = hdmlp's ds.stats()['bytes_read']; disk = what the cell read "
          "from the disk (blkio); limit/peak = the cell's memory limit and peak incl. page cache")
    if goal_bytes:
        worst = max(v for _, _, v in goal_bytes)
        print(f"goal: hdmlp bytes read at W > 0 <= 1.05 x W = 0: worst {worst:.3f} -> "
              f"{'MET' if worst <= 1.05 else 'MISSED'} "
              f"({', '.join(f'{g} W={w} {v:.3f}' for g, w, v in goal_bytes)})")
    if goal_speed:
        least = min(v for _, v in goal_speed)
        print(f"goal: regime A, hdmlp >= 2.5 x faster than ImageFolder at every W: least "
              f"{least:.2f}x -> {'MET' if least >= 2.5 else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
