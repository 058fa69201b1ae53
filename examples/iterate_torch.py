#!/usr/bin/python3
"""Iterate a packed dataset from PyTorch in random order within a memory budget and print
the throughput: the Python counterpart of examples/iterate.c.

    PYTHONPATH=build/python /usr/bin/python3 examples/iterate_torch.py DATASET [EPOCHS] [WORKERS]

WORKERS (default 2) DataLoader workers share the rank's one loader (a data plane process):
the same order and bytes read as WORKERS=0.
"""
import sys
import time

import torch

import hdmlp.torch


def main():
    path = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    ds = hdmlp.torch.HdmlpIterableDataset(path, batch_size=256, memory="25%", seed=42,
                                          epochs=epochs)
    dl = hdmlp.torch.DataLoader(ds, batch_size=None, num_workers=workers,
                                persistent_workers=workers > 0)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        t0, n, nbytes = time.perf_counter(), 0, 0
        for samples, labels in dl:   # uint8 tensors, int64 labels
            n += len(labels)
            nbytes += sum(s.numel() for s in samples) if isinstance(samples, list) \
                else samples.numel()
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {n} samples, {nbytes / 1e6:.1f} MB in {dt:.2f} s: "
              f"{n / dt:,.0f} samples/s, {nbytes / dt / 1e6:.0f} MB/s ({workers} DataLoader "
              f"workers, torch {torch.__version__})")
    st = ds.stats()
    print(f"read from storage: {st['bytes_read'] / 1e6:.1f} MB in {st['epochs']} epochs "
          f"(one loader for the rank)")


if __name__ == "__main__":
    main()
