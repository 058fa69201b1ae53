#!/usr/bin/python3
"""One epoch of JPEG samples decoded in DataLoader workers: hdmlp.torch vs ImageFolder.

    workers_bench.py gen DIR --count N            # N noise JPEGs of ~110 KB in 10 classes
    workers_bench.py hdmlp DATASET --workers W [--batch 32] [--memory 25%]
    workers_bench.py imagefolder DIR --workers W [--batch 32]

The transform, the same for both, is what a training input pipeline does per sample: PIL
decode, resize to 64x64, to a uint8 tensor (~2 ms here). hdmlp: HdmlpIterableDataset +
hdmlp.torch.DataLoader(num_workers=W, persistent_workers=W>0), one loader for the rank
(the data plane) whatever W. ImageFolder: torchvision's, shuffled, same W and batch size.
Prints one JSON line: wall seconds of the epoch, samples, and for hdmlp the loader's
bytes read. Used by workers_bench.sh (which runs it in the benchmark cell).
"""
import argparse
import io
import json
import os
import random
import time

import torch


def transform_bytes(data):
    from PIL import Image
    img = Image.open(io.BytesIO(data)).convert("RGB").resize((64, 64))
    return torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(64, 64, 3)


def hdmlp_transform(t):
    return transform_bytes(t.numpy().tobytes())


def gen(args):
    from PIL import Image
    rng = random.Random(7)
    for i in range(args.count):
        d = os.path.join(args.path, f"c{i % 10}")
        os.makedirs(d, exist_ok=True)
        side = rng.randint(270, 330)  # ~90-130 KB
        Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(
            os.path.join(d, f"{i:06d}.jpg"), "JPEG", quality=95)


def run_hdmlp(args):
    import hdmlp.torch as ht
    ds = ht.HdmlpIterableDataset(args.path, args.batch, args.memory, seed=1, epochs=1,
                                 transform=hdmlp_transform)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=args.workers,
                       persistent_workers=args.workers > 0)
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in dl)
    wall = time.perf_counter() - t0
    st = ds.stats()
    return {"wall": wall, "samples": n, "bytes_read": st["bytes_read"],
            "stall": dl.stall_seconds}


def run_imagefolder(args):
    import torchvision
    ds = torchvision.datasets.ImageFolder(
        args.path, loader=lambda p: open(p, "rb").read(), transform=transform_bytes)
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
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--memory", default="25%")
    args = ap.parse_args()
    if args.mode == "gen":
        gen(args)
        return
    out = run_hdmlp(args) if args.mode == "hdmlp" else run_imagefolder(args)
    out.update(mode=args.mode, workers=args.workers)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
