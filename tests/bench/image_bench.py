#!/usr/bin/python3
"""Images/s to a 224x224 RandomResizedCrop + horizontal flip uint8 batch: hdmlp's image
pipeline (decode and augmentation in the loader's C threads) against torchvision's
ImageFolder + PIL transforms and against hdmlp's bytes + the same PIL transforms, both in
DataLoader workers.

    image_bench.py hdmlp DATASET [--threads T] [--io-threads N] [--count N] [--memory 25%]
    image_bench.py hdmlp-pil DATASET --workers W [--count N] [--memory 25%]
    image_bench.py imagefolder DIR --workers W [--count N]

hdmlp: hdmlp.torch.HdmlpIterableDataset(image=hdmlp.ImagePipeline(224)) through
hdmlp.torch.DataLoader(batch_size=None, num_workers=0): batches arrive as (n, 224, 224, 3)
uint8 tensors viewing the loader's buffer; --threads = decode threads (0 = the automatic
I/O/decode balance), --io-threads = the loader's I/O threads.
hdmlp-pil: HdmlpIterableDataset(transform=PIL decode + RandomResizedCrop(224) +
RandomHorizontalFlip + PILToTensor) in W DataLoader workers (the data plane feeds them).
imagefolder: torchvision.datasets.ImageFolder with the same PIL transform, torch
DataLoader(shuffle=True, num_workers=W, batch_size 128).
All three produce uint8 images of 224x224 (HWC for hdmlp, CHW for the PIL ones: layout
is free in both). --count stops after that many images (0 = one whole epoch).

Prints one JSON line: wall seconds from creating the iterator to the last image, images,
images/s, (hdmlp) the process's CPU seconds per image over the same span (all its threads), hdmlp's loader stats (bytes_read, decode/read rates, the thread split), and the
peak anonymous + shared memory of the process's memory cgroup (workers_bench.MemSampler).
"""
import argparse
import io
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workers_bench import MemSampler  # noqa: E402

SIZE = 224
BATCH = 128


def pil_transform():
    from torchvision import transforms as T
    return T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.PILToTensor()])


class BytesTransform:
    """uint8 tensor of an encoded image -> the PIL pipeline (hdmlp-pil)."""

    def __init__(self):
        self.t = pil_transform()

    def __call__(self, x):
        from PIL import Image
        return self.t(Image.open(io.BytesIO(x.numpy().tobytes())).convert("RGB"))


def run_hdmlp(args):
    import hdmlp
    import hdmlp.torch as ht
    kwargs = {}
    if args.io_threads:
        kwargs["threads"] = args.io_threads
    if args.mode == "hdmlp":
        kwargs["image"] = hdmlp.ImagePipeline(SIZE, threads=args.threads)
    else:
        kwargs["transform"] = BytesTransform()
    ds = ht.HdmlpIterableDataset(args.path, batch_size=BATCH, memory=args.memory, seed=1,
                                 epochs=1, **kwargs)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=args.workers)
    ds.set_epoch(0)
    n, t0, c0, splits = 0, time.perf_counter(), time.process_time(), []
    for x, y in dl:
        n += len(y)
        assert x.dtype == torch.uint8 and x.shape[0] == len(y)
        if args.mode == "hdmlp" and n // BATCH % 8 == 0:
            st = ds.stats()
            splits.append((st["io_threads_active"], st["decode_threads_active"]))
        if args.count and n >= args.count:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = ds.stats() or {}
    out = {"wall": wall, "images": n, "images_per_s": n / wall, "stall": dl.stall_seconds}
    if args.mode == "hdmlp":  # every thread of the pipeline is in this process
        out["cpu_s_per_image"] = cpu / n
    out.update({k: st.get(k) for k in (
        "bytes_read", "read_ops", "images_decoded", "decode_failures", "dct_scaled",
        "decode_busy_ns", "decode_rate", "read_rate", "io_threads_active",
        "decode_threads_active", "balance_moves", "peak_memory_bytes")})
    if splits:
        out["split_samples"] = splits
    return out


def run_imagefolder(args):
    import torchvision
    ds = torchvision.datasets.ImageFolder(args.path, transform=pil_transform())
    g = torch.Generator().manual_seed(1)
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, generator=g,
                                     num_workers=args.workers)
    n, t0 = 0, time.perf_counter()
    for x, y in dl:
        n += len(y)
        if args.count and n >= args.count:
            break
    wall = time.perf_counter() - t0
    return {"wall": wall, "images": n, "images_per_s": n / wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["hdmlp", "hdmlp-pil", "imagefolder"])
    ap.add_argument("path")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="hdmlp decode threads (0 = auto)")
    ap.add_argument("--io-threads", type=int, default=0, help="hdmlp I/O threads (0 = default)")
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--memory", default="25%")
    args = ap.parse_args()
    torch.set_num_threads(1)
    mem = MemSampler()
    mem.start()
    out = run_imagefolder(args) if args.mode == "imagefolder" else run_hdmlp(args)
    out.update(mode=args.mode, workers=args.workers, threads=args.threads,
               io_threads=args.io_threads, count=args.count, cell_memory=mem.result())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
