#!/usr/bin/python3
"""PyTorch DataLoader contender of the loader benchmark: per-file random reads of raw bytes.

    loader_torch_baseline.py --list FILE [--root DIR] [--workers 2] [--batch 64] [--seed S]
                             [--limit N]

A map-style Dataset over the files of FILE (one path per line, optionally TAB + label;
relative to DIR, default the list's directory) whose items are the raw bytes as uint8
tensors (what an ImageFolder does before decoding), iterated once by
torch.utils.data.DataLoader(shuffle=True, num_workers=W) with a seeded generator. The
timer starts before the first batch is requested (worker start-up included) and stops
after the last. Prints one JSON object.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class RawFiles(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            buf = bytearray(os.fstat(f.fileno()).st_size)
            n = f.readinto(buf)
        return torch.frombuffer(buf, dtype=torch.uint8)[:n] if n else torch.empty(0)


def collate(items):
    return items  # samples differ in size: a batch is a list of tensors


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", required=True)
    p.add_argument("--root")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int)
    o = p.parse_args()
    root = o.root or os.path.dirname(os.path.abspath(o.list))
    with open(o.list) as f:
        rels = [line.split("\t", 1)[0].rstrip("\n") for line in f if line.strip()]
    paths = [r if r.startswith("/") else os.path.join(root, r) for r in rels]
    gen = torch.Generator()
    gen.manual_seed(o.seed)
    if o.limit is not None:
        order = torch.randperm(len(paths), generator=gen)[: o.limit].tolist()
        paths = [paths[i] for i in order]
    torch.set_num_threads(1)
    loader = DataLoader(RawFiles(paths), batch_size=o.batch, shuffle=True,
                        num_workers=o.workers, collate_fn=collate, generator=gen,
                        persistent_workers=False)
    samples = nbytes = 0
    t0 = time.monotonic()
    for batch in loader:
        samples += len(batch)
        nbytes += sum(t.numel() for t in batch)
    sec = time.monotonic() - t0
    json.dump({"samples": samples, "bytes_delivered": nbytes, "bytes_read": nbytes,
               "seconds": sec, "samples_per_s": samples / sec, "mb_per_s": nbytes / 1e6 / sec,
               "workers": o.workers, "batch": o.batch, "seed": o.seed,
               "torch": torch.__version__}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
