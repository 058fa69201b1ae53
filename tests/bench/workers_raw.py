#!/usr/bin/python3
"""Raw-byte batches through torch DataLoader workers: samples/s and bytes read at W = 0/2/4.

    workers_raw.py [--dataset DIR] [--pack PATH] [--work DIR] [--workers 0,2,4]
                   [--batch 256] [--memory 25%] [--epochs 2] [--repeats 3]
                   [--storage-cost OP_US,BYTES_PER_S]

Without --dataset it builds the quick start's dataset: Debian's Fashion-MNIST as 60,000 PNG
files (tests/data/make_fashion_mnist.py), packed with hdmlp-pack --seed 1. For each W it
iterates hdmlp.torch.HdmlpIterableDataset (no transform: each batch is a list of uint8
tensors, one per PNG) through hdmlp.torch.DataLoader(num_workers=W, persistent_workers=W>0)
with the pread engine, and reports per epoch samples/s (median over repeats), bytes read
from storage by the rank's loader, and both as ratios to W = 0. The data stay in the page
cache (this measures the worker path, not storage). Needs the hdmlp package on PYTHONPATH.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import hdmlp
import hdmlp.torch as ht

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def build_dataset(work, pack):
    src = os.path.join(work, "fashion-mnist")
    out = os.path.join(work, "train.hdmlp")
    if not os.path.exists(out):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/data/make_fashion_mnist.py"),
                        src], check=True)
        subprocess.run([pack, "--seed", "1", "-o", out, os.path.join(src, "train")],
                       check=True, stdout=subprocess.DEVNULL)
    return out


def run(path, workers, args):
    kw = {}
    if args.storage_cost:
        kw["storage_cost"] = tuple(float(x) for x in args.storage_cost.split(","))
    ds = ht.HdmlpIterableDataset(path, args.batch, args.memory, seed=1, engine="pread",
                                 epochs=args.epochs, **kw)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=workers,
                       persistent_workers=workers > 0)
    times, n = [], 0
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        t0 = time.perf_counter()
        for samples, labels in dl:
            n += len(labels)
        times.append(time.perf_counter() - t0)
    st = ds.stats()
    del dl, ds
    return times, n, st["bytes_read"], st["chunk_loads"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset")
    ap.add_argument("--pack", default=os.environ.get("HDMLP_PACK",
                                                     os.path.join(ROOT, "build/packer/hdmlp-pack")))
    ap.add_argument("--work")
    ap.add_argument("--workers", default="0,2,4")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--memory", default="25%")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--storage-cost", help="op_us,bytes_per_s: a fixed cost model")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="hdmlp-workers-raw-")
    path = args.dataset or build_dataset(work, args.pack)
    n = len(hdmlp.Dataset(path))
    print(f"dataset {path}: {n} samples; batch {args.batch}, memory {args.memory}, "
          f"{args.epochs} epochs, median of {args.repeats}")
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        first, later, read = [], [], []
        for _ in range(args.repeats):
            times, delivered, bytes_read, loads = run(path, w, args)
            assert delivered == n * args.epochs, (delivered, n * args.epochs)
            first.append(n / times[0])
            later.append(n / statistics.median(times[1:]) if len(times) > 1 else n / times[0])
            read.append(bytes_read / args.epochs)
        rows.append((w, statistics.median(first), statistics.median(later),
                     statistics.median(read), loads))
    base = rows[0]
    print(f"{'W':>2} {'epoch 1 samples/s':>18} {'later samples/s':>16} {'vs W=0':>7} "
          f"{'MB read/epoch':>14} {'vs W=0':>7} {'chunk loads':>11}")
    for w, s1, s2, rd, loads in rows:
        print(f"{w:>2} {s1:>18,.0f} {s2:>16,.0f} {base[2] / s2:>6.2f}x {rd / 1e6:>14.1f} "
              f"{rd / base[3]:>6.2f}x {loads:>11}")
    print("(vs W=0: time ratio of later epochs, >1 = slower; bytes ratio. Chunk loads follow\n"
          " from the order alone; bytes also from the live cost model's whole/ranged choices,\n"
          " which depend on timings: --storage-cost fixes the model)")


if __name__ == "__main__":
    main()
