#!/usr/bin/python3
"""Table and ratios of a finished dist_bench.sh run.

    dist_report.py OUT     reads OUT/runs.jsonl and OUT/meta.json, prints the table

Per run: `epoch s` = seconds per epoch of the slowest rank (loader creation to its last
batch, over the epochs); `wall s` = the whole cell run (mpirun start-up, every rank's
teardown); samples delivered in all; remote requests, prefetch hits (remote_hits), misses
and chunk loads summed over the ranks; `loads/ch` = chunk loads / chunks / epochs (for
`indep`, per process); `read GiB` = bytes the loaders read; `dev GiB`/`dev ops` = what the
disk served (blkio); `read/dlv` = read / delivered bytes; `peak MiB` = the cell's peak
memory; `acc/bud` = the largest per-rank peak of accounted memory / its budget.
"""
import json
import os
import sys


def load(out):
    runs = [json.loads(line) for line in open(os.path.join(out, "runs.jsonl")) if line.strip()]
    meta = json.load(open(os.path.join(out, "meta.json")))
    return runs, meta


def summarise(run, chunks):
    res = [r for r in run["results"] if r]
    epochs = run["epochs"]
    cell = run["cell"]
    s = {"tag": run["tag"], "kind": run["kind"], "world": run["world"], "ok": False,
         "wall": cell["wall_seconds"], "dev_bytes": cell["dev_read_bytes"],
         "dev_ops": cell["dev_read_ops"], "peak": cell["peak_memory"],
         "oom": cell.get("oom_kills", 0), "rc": cell["rc"]}
    if run["kind"].startswith("dist"):
        if len(res) != 1:
            return s
        t = res[0]
        ranks = t.get("ranks", [])
        per = ranks if ranks else [t]
        s.update(ok=cell["rc"] == 0, epoch=t["seconds"] / epochs, samples=t["samples"],
                 remote=t["remote_requests"], hits=t["remote_hits"], sent=t["prefetch_sent"],
                 misses=t["misses"], loads=t["chunk_loads"], lpc=t["loads_per_chunk"],
                 read=t["bytes_read"], delivered=t["bytes_delivered"],
                 stall=t["stall_ns"] / 1e9,
                 acc=max(r["peak_memory_bytes"] / r["memory_budget"] for r in per))
    else:
        if len(res) != run["world"]:
            return s
        s.update(ok=cell["rc"] == 0, epoch=max(r["seconds"] for r in res) / epochs,
                 samples=sum(r["samples"] for r in res), remote=0, hits=0, sent=0,
                 misses=sum(r["misses"] for r in res), loads=sum(r["chunk_loads"] for r in res),
                 lpc=sum(r["chunk_loads"] for r in res) / (chunks * epochs * len(res)),
                 read=sum(r["bytes_read"] for r in res),
                 delivered=sum(r["bytes_delivered"] for r in res),
                 stall=sum(r["stall_ns"] for r in res) / 1e9,
                 acc=max(r["peak_memory_bytes"] / r["memory_budget"] for r in res))
    return s


def ratio(a, b):
    return f"{a / b:.2f}" if b else "inf"


def main(out):
    runs, meta = load(out)
    chunks = -(-meta["samples"] // meta["k"])
    rows = [summarise(r, chunks) for r in runs]
    print(f"dist_bench: {meta['samples']} samples, {meta['raw_bytes'] / 2**20:.0f} MiB, K={meta['k']}, "
          f"{meta['epochs']} epoch(s), batch {meta['batch']}; regime A: {meta['read_iops']} read ops/s, "
          f"{meta['read_bps'] / 1e6:.0f} MB/s; per-rank budget 25 % of a rank's share; {meta['cpus']} cores; "
          f"git {meta['git']}")
    hdr = (f"{'run':<16} {'epoch s':>8} {'wall s':>7} {'samples':>8} {'remote rq':>9} {'pf hits':>8} "
           f"{'misses':>7} {'loads':>6} {'loads/ch':>8} {'read GiB':>8} {'dev GiB':>7} {'dev ops':>7} "
           f"{'read/dlv':>8} {'stall s':>7} {'peak MiB':>8} {'acc/bud':>7}")
    print(hdr)
    for s in rows:
        if not s["ok"]:
            print(f"{s['tag']:<16} FAILED (rc {s['rc']}, oom kills {s['oom']}, wall {s['wall']:.1f} s)")
            continue
        print(f"{s['tag']:<16} {s['epoch']:>8.2f} {s['wall']:>7.1f} {s['samples']:>8} {s['remote']:>9} "
              f"{s['hits']:>8} {s['misses']:>7} {s['loads']:>6} {s['lpc']:>8.2f} "
              f"{s['read'] / 2**30:>8.2f} {s['dev_bytes'] / 2**30:>7.2f} {s['dev_ops']:>7} "
              f"{ratio(s['read'], s['delivered']):>8} {s['stall']:>7.1f} {s['peak'] / 2**20:>8.0f} "
              f"{s['acc']:>7.2f}")
    print()
    print("ratios (R = ranks): off/on = prefetch off vs on; indep/on = R independent single-rank "
          "processes (no exchange, each a full epoch) vs the distributed job with prefetch")
    for world in sorted({s["world"] for s in rows}):
        by = {s["kind"]: s for s in rows if s["world"] == world and s["ok"]}
        on, off, ind = by.get("dist-on"), by.get("dist-off"), by.get("indep")
        parts = []
        if on and off:
            parts.append(f"epoch time off/on {ratio(off['epoch'], on['epoch'])}")
            parts.append(f"remote requests off/on {ratio(off['remote'], on['remote'])}")
            parts.append(f"misses off/on {ratio(off['misses'], on['misses'])}")
        if on and ind:
            parts.append(f"epoch time indep/on {ratio(ind['epoch'], on['epoch'])}")
            parts.append(f"bytes read indep/on {ratio(ind['read'], on['read'])}")
            parts.append("bytes read per delivered byte indep/on "
                         f"{ratio(ind['read'] / ind['delivered'], on['read'] / on['delivered'])}")
            parts.append("seconds per delivered sample indep/on "
                         f"{ratio(ind['epoch'] * meta['epochs'] / ind['samples'], on['epoch'] * meta['epochs'] / on['samples'])}")
        print(f"R={world}: " + "; ".join(parts))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dist_report.py OUT")
    main(sys.argv[1])
