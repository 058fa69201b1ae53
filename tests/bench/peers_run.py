#!/usr/bin/python3
"""Contenders of peers_bench.sh that are not a program of their own.

    peers_run.py hdmlp-torch DATASET --memory 25% [--workers 2] [--batch 32] [--epochs 1]
                 [--seed 1] [--order strict|pool] [--pool-reads R]
                 [--storage-cost OP_US,BYTES_PER_S] [--log FILE]
    peers_run.py perfile-order --list LIST --seed S [--epochs 4] [--log FILE]
    peers_run.py arena DATASET [--workers 2] [--batch 32]   # bytes of hdmlp.torch's arena

hdmlp-torch: hdmlp.torch.HdmlpIterableDataset(DATASET, batch_size, memory, seed,
  with_indices=True, order=..., pool_reads=...) iterated by hdmlp.torch.DataLoader
  (batch_size=None, num_workers=W, persistent_workers=W > 0): raw bytes, no transform. The
  indices are the samples' storage positions in the pack; they go to --log, one line per
  epoch (order_figures.py).
  Prints one JSON line: epoch seconds (from the epoch's first next() to its last batch,
  worker and data-plane start-up included in epoch 0), samples, bytes, the loader's stats.
arena: the shared-memory arena hdmlp.torch's data plane makes for W workers over DATASET
  (on top of the loader's budget; it grows with the largest samples, so a warm set of
  smaller files under-states it).
perfile-order: the order loader_perfile.c requests (Fisher-Yates driven by splitmix64
  seeded S; epoch e uses seed S + e, one program run per epoch), as positions in LIST (the
  files' creation order, their storage order on disk), written to --log. No I/O.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

M64 = (1 << 64) - 1


def splitmix64_shuffle(n, seed):
    """loader_perfile.c's order: perm[i] = list index read i-th."""
    perm = list(range(n))
    s = seed & M64
    for i in range(n, 1, -1):
        s = (s + 0x9E3779B97F4A7C15) & M64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        k = z % i
        perm[i - 1], perm[k] = perm[k], perm[i - 1]
    return perm


def write_log(path, epochs):
    if path:
        from order_figures import write_ids
        write_ids(path, epochs)


def perfile_order(o):
    with open(o.list) as f:
        n = sum(1 for line in f if line.split("\t", 1)[0].strip())
    epochs = [splitmix64_shuffle(n, o.seed + e) for e in range(o.epochs)]
    write_log(o.log, epochs)
    print(json.dumps({"samples": n, "epochs": o.epochs, "seed": o.seed, "order_log": o.log}))


def arena(o):
    import hdmlp.torch as ht
    ds = ht.HdmlpIterableDataset(o.dataset, batch_size=o.batch, memory="100%", seed=0)
    print(ds._plane_spec(o.workers)["arena"])


def hdmlp_torch(o):
    import torch
    import hdmlp.torch as ht
    torch.set_num_threads(1)
    kw = {}
    if o.storage_cost:
        op_us, bps = o.storage_cost.split(",")
        kw["storage_cost"] = (float(op_us), float(bps))
    used = o.order
    kw["order"] = o.order
    if o.order == "pool":
        kw["pool_reads"] = o.pool_reads
    ds = ht.HdmlpIterableDataset(o.dataset, batch_size=o.batch, memory=o.memory, seed=o.seed,
                                 with_indices=True, epochs=o.epochs, **kw)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=o.workers,
                       persistent_workers=o.workers > 0)
    epochs, secs = [], []
    nbytes = 0
    t_all = time.perf_counter()
    for e in range(o.epochs):
        ds.set_epoch(e)
        idx = []
        t0 = time.perf_counter()
        for samples, labels, indices in dl:
            if isinstance(samples, torch.Tensor):
                nbytes += samples.numel()
            else:
                nbytes += sum(t.numel() for t in samples)
            idx.extend(indices.tolist())
        secs.append(time.perf_counter() - t0)
        epochs.append(idx)
    seconds = time.perf_counter() - t_all
    write_log(o.log, epochs)
    st = ds.stats() or {}
    samples = sum(len(e) for e in epochs)
    out = {"samples": samples, "bytes": nbytes, "seconds": seconds, "epoch_seconds": secs,
           "samples_per_s": samples / seconds if seconds > 0 else None,
           "first_epoch_samples_per_s": len(epochs[0]) / secs[0] if secs[0] > 0 else None,
           "order": o.order, "order_used": used, "pool_reads": o.pool_reads,
           "workers": o.workers, "batch": o.batch, "memory_budget": ds.memory,
           "order_log": o.log, "stall_seconds": dl.stall_seconds}
    out.update({k: st.get(k) for k in ("bytes_read", "read_ops", "chunk_loads",
                                        "whole_refills", "ranged_refills", "peak_memory_bytes",
                                        "direct_io", "source_op_ns", "source_bytes_per_s",
                                        "plane_arena_bytes")})
    print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    h = sub.add_parser("hdmlp-torch")
    h.add_argument("dataset")
    h.add_argument("--memory", required=True)
    h.add_argument("--workers", type=int, default=2)
    h.add_argument("--batch", type=int, default=32)
    h.add_argument("--epochs", type=int, default=1)
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--order", choices=["strict", "pool"], default="strict")
    h.add_argument("--pool-reads", type=float, default=None)
    h.add_argument("--storage-cost", default=None)
    h.add_argument("--log", default=None)
    f = sub.add_parser("perfile-order")
    f.add_argument("--list", required=True)
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--epochs", type=int, default=4)
    f.add_argument("--log", default=None)
    a = sub.add_parser("arena")
    a.add_argument("dataset")
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--batch", type=int, default=32)
    o = p.parse_args()
    if o.mode == "hdmlp-torch":
        hdmlp_torch(o)
    elif o.mode == "perfile-order":
        perfile_order(o)
    else:
        arena(o)


if __name__ == "__main__":
    main()
