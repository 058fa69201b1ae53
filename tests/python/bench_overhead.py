#!/usr/bin/python3
"""Python iteration overhead vs the C API on the warm path.

    bench_overhead.py [--samples N] [--batch 256] [--epochs 3] [--sizes 1024,112640]

For each sample size it packs N random samples (codec none), then runs the same loader
configuration (memory = 200 % of the data, so the warm path is measured, not storage)
through hdmlp-bench (C) and through hdmlp.Loader (Python: each sample touched as a
memoryview, as training code would) and prints samples/s and the ratio. Needs HDMLP_PACK,
HDMLP_BENCH and the hdmlp package on PYTHONPATH. Not a pytest test.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
import time

import hdmlp


def make(root, n, size):
    src = os.path.join(root, f"src-{size}")
    os.makedirs(os.path.join(src, "x"))
    rng = random.Random(size)
    blob = rng.randbytes(size * 64)
    for i in range(n):
        off = rng.randrange(0, len(blob) - size)
        with open(os.path.join(src, "x", f"{i:06d}"), "wb") as f:
            f.write(blob[off:off + size])
    out = os.path.join(root, f"ds-{size}")
    subprocess.run([os.environ["HDMLP_PACK"], "--quiet", "--compress", "none", "--seed", "1",
                    "-o", out, src], check=True)
    shutil.rmtree(src)
    return out


def c_rate(path, memory, batch, epochs):
    res = subprocess.run([os.environ["HDMLP_BENCH"], path, "--memory", str(memory), "--batch",
                          str(batch), "--epochs", str(epochs), "--json", "--quiet"],
                         check=True, capture_output=True, text=True)
    st = json.loads(res.stdout)
    for key in ("samples_per_s", "samples_per_second", "throughput"):
        if key in st:
            return float(st[key])
    return st["samples"] / st["seconds"]


def py_rate(path, memory, batch, epochs):
    ld = hdmlp.Loader(path, batch, memory, seed=0, epochs=epochs)
    t0 = time.perf_counter()
    n = 0
    total = 0
    for _ in range(epochs):
        for b in ld:
            for v in b.samples:
                total += len(v)
            n += len(b)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--sizes", default="1024,112640")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="hdmlp-overhead-")
    try:
        print(f"{'size':>8} {'C samples/s':>12} {'Py samples/s':>13} {'Py/C':>6}")
        for size in (int(s) for s in args.sizes.split(",")):
            n = args.samples if size <= 4096 else max(1000, args.samples // 20)
            path = make(root, n, size)
            memory = 2 * n * size + (64 << 20)
            c = c_rate(path, memory, args.batch, args.epochs)
            p = py_rate(path, memory, args.batch, args.epochs)
            print(f"{size:>8} {c:12.0f} {p:13.0f} {p / c:6.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
