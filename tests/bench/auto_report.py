#!/usr/bin/python3
"""Table of auto_bench.sh's results: auto_report.py OUT/results.jsonl

Per dataset size and regime: each contender's epoch time (its own timer: hdmlp from loader
creation to the last batch, learning included; per-file from the first open to the last
read), the cell's wall time, the bytes and operations the disk served, and the ratios
per-file / contender, and default / the better hand-set plan (whole or ranges).
"""
import json
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    groups = {}
    for r in rows:
        groups.setdefault((r["count"], r["regime"]), {})[r["name"]] = r
    for (count, regime), runs in sorted(groups.items()):
        print(f"\n{count} samples, regime {regime} "
              f"({'150 ops/s + 400 MB/s' if regime == 'A' else '400 MB/s'})")
        print(f"{'contender':18} {'epoch s':>8} {'wall s':>7} {'dev MB':>8} {'dev ops':>8} "
              f"{'vs per-file':>11}  model / mode")
        base = runs.get("perfile-c", {}).get("result") or {}
        base_s = base.get("seconds")
        for name, r in runs.items():
            res = r.get("result") or {}
            s = res.get("seconds")
            cell = r["cell"]
            ratio = f"{base_s / s:.2f}x" if s and base_s else "-"
            extra = ""
            if "source_op_ns" in res:
                extra = (f"{res['source_op_ns'] / 1e3:.0f} us/op "
                         f"{res['source_bytes_per_s'] / 1e6:.0f} MB/s, "
                         f"{'direct' if res.get('direct_io') else 'buffered'}, "
                         f"{res['whole_refills']} whole / {res['ranged_refills']} ranged, "
                         f"A={res['abstract_chunks']}")
                if res.get("cost_learning"):
                    extra += f", {res.get('cost_explorations', 0)} explorations"
            print(f"{name:18} {s if s is None else round(s, 2)!s:>8} "
                  f"{cell['wall_seconds']:7.2f} {cell['dev_read_bytes'] / 1e6:8.0f} "
                  f"{cell['dev_read_ops']:8d} {ratio:>11}  {extra}")
        hand = [runs[n]["result"]["seconds"] for n in ("hand-whole", "hand-ranges")
                if n in runs and runs[n].get("result")]
        d = (runs.get("default") or {}).get("result")
        if d and hand:
            print(f"default / better hand-set plan: {d['seconds'] / min(hand):.2f} "
                  "(goal <= 1.10)")


if __name__ == "__main__":
    main(sys.argv[1])
