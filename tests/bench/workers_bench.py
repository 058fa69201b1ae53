#!/usr/bin/python3
"""One cold epoch of JPEGs decoded in DataLoader workers: hdmlp.torch vs ImageFolder.

    workers_bench.py gen DIR --count N [--seed 7]   # N noise JPEGs, mean ~110 KiB, 10 classes
    workers_bench.py hdmlp DATASET --workers W [--batch 32] [--memory 25%]
                     [--storage-cost OP_US,BYTES_PER_S]  # a fixed cost model, not learnt
    workers_bench.py imagefolder DIR --workers W [--batch 32]

The transform, one function for both, is what an image input pipeline does per sample in
the workers: PIL decode of the JPEG, resize to 64x64, to a float tensor (torchvision's
to_tensor). Its input is the file's bytes as a uint8 tensor: what HdmlpIterableDataset
hands a transform, and what the ImageFolder's loader here returns.
hdmlp: HdmlpIterableDataset + hdmlp.torch.DataLoader(batch_size=None, num_workers=W,
persistent_workers=W > 0): one loader for the rank (the data plane) whatever W.
ImageFolder: torchvision's, torch DataLoader(shuffle=True), same W and batch size.

Prints one JSON line: the epoch's wall seconds (from creating the DataLoader's iterator,
so worker and data plane start-up are in it, to the last batch), samples, for hdmlp the
loader's stats (bytes_read, read_ops, chunk_loads, refills), and the peak anonymous and
shared memory of the process's memory cgroup (all processes of the benchmark cell: sampled
every 20 ms from memory.stat), which workers_bench.sh uses to size the cell.
"""
import argparse
import io
import json
import os
import random
import threading
import time

import torch


def transform(t):
    """uint8 tensor of a JPEG file's bytes -> float tensor 3x64x64."""
    from PIL import Image
    from torchvision.transforms.functional import to_tensor
    img = Image.open(io.BytesIO(t.numpy().tobytes())).convert("RGB")
    return to_tensor(img.resize((64, 64), Image.BILINEAR))


def read_file(path):
    """ImageFolder's loader: the file's bytes as a uint8 tensor (the transform's input)."""
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def gen(args):
    """Noise images, side 276-336 px, JPEG quality 95: ~1.2 bytes a pixel, mean ~110 KiB."""
    from PIL import Image
    rng = random.Random(args.seed)
    total = 0
    for i in range(args.count):
        d = os.path.join(args.path, f"class{i % 10}")
        os.makedirs(d, exist_ok=True)
        side = rng.randint(276, 336)
        p = os.path.join(d, f"{i:06d}.jpg")
        Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(
            p, "JPEG", quality=95)
        total += os.path.getsize(p)
    print(json.dumps({"count": args.count, "bytes": total, "mean": total / args.count}))


class MemSampler(threading.Thread):
    """Peaks of total_rss, total_shmem and total_cache of this process's memory cgroup."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = {"rss": 0, "shmem": 0, "cache": 0, "rss_shmem": 0}
        self.path = None
        for line in open("/proc/self/cgroup"):
            _, ctrl, cg = line.rstrip("\n").split(":", 2)
            if "memory" in ctrl.split(","):
                self.path = f"/sys/fs/cgroup/memory{cg}/memory.stat"
        self.stop = threading.Event()

    def sample(self):
        try:
            with open(self.path) as f:
                st = dict(line.split() for line in f)
        except (OSError, TypeError, ValueError):
            return
        v = {k: int(st.get("total_" + k, 0)) for k in ("rss", "shmem", "cache")}
        v["rss_shmem"] = v["rss"] + v["shmem"]
        for k, x in v.items():
            self.peak[k] = max(self.peak[k], x)

    def run(self):
        while not self.stop.wait(0.02):
            self.sample()

    def result(self):
        self.stop.set()
        self.sample()
        return self.peak


def run_hdmlp(args):
    import hdmlp.torch as ht
    kwargs = {}
    if args.storage_cost:
        op_us, bps = args.storage_cost.split(",")
        kwargs["storage_cost"] = (float(op_us), float(bps))
    ds = ht.HdmlpIterableDataset(args.path, batch_size=args.batch, memory=args.memory, seed=1,
                                 transform=transform, epochs=1, **kwargs)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=args.workers,
                       persistent_workers=args.workers > 0)
    ds.set_epoch(0)
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in dl)
    wall = time.perf_counter() - t0
    st = ds.stats() or {}
    out = {"wall": wall, "samples": n, "stall": dl.stall_seconds,
           "raw_bytes": ds._dataset.raw_bytes, "memory_budget": ds.memory}
    out.update({k: st.get(k) for k in ("bytes_read", "read_ops", "chunk_loads",
                                        "whole_refills", "ranged_refills", "abstract_chunks",
                                        "source_op_ns", "source_bytes_per_s",
                                        "peak_memory_bytes")})
    return out


def run_imagefolder(args):
    import torchvision
    ds = torchvision.datasets.ImageFolder(args.path, loader=read_file, transform=transform)
    g = torch.Generator().manual_seed(1)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, generator=g,
                                     num_workers=args.workers,
                                     persistent_workers=args.workers > 0)
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in dl)
    return {"wall": time.perf_counter() - t0, "samples": n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["gen", "hdmlp", "imagefolder"])
    ap.add_argument("path")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--memory", default="25%")
    ap.add_argument("--storage-cost", default=None)
    args = ap.parse_args()
    if args.mode == "gen":
        gen(args)
        return
    mem = MemSampler()
    mem.start()
    out = run_hdmlp(args) if args.mode == "hdmlp" else run_imagefolder(args)
    out.update(mode=args.mode, storage_cost=args.storage_cost, workers=args.workers, batch=args.batch, cell_memory=mem.result())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
