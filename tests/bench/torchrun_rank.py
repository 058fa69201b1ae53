#!/usr/bin/python3
"""One rank of torchrun_ranks.sh, started by torchrun: iterates an hdmlp.torch dataset
through torch's DataLoader, epochs kept in step with a barrier (as DDP keeps them), and
writes one JSON line with its epoch times, CPU seconds and loader stats.

    torchrun --standalone --nproc-per-node R torchrun_rank.py DATASET --memory BYTES
             --same-host shm|socket|tcp --workers W --epochs E --out FILE
"""
import argparse
import json
import resource
import time

import torch.distributed as dist

import hdmlp.torch as ht


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--memory", required=True)
    ap.add_argument("--same-host", default="shm")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    memory = int(args.memory) if args.memory.isdigit() else args.memory
    ds = ht.HdmlpIterableDataset(args.dataset, args.batch, memory, seed=1, epochs=args.epochs,
                                 num_workers=args.workers, same_host=args.same_host)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=args.workers,
                       persistent_workers=args.workers > 0)
    times, samples, nbytes = [], 0, 0
    dist.barrier()
    u0, s0 = cpu_seconds()
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        t0 = time.perf_counter()
        for data, labels in dl:
            samples += len(labels)
            nbytes += sum(d.numel() for d in data)
        dist.barrier()  # the job's epoch ends when its slowest rank's does
        times.append(time.perf_counter() - t0)
    u1, s1 = cpu_seconds()
    st = ds.stats()
    rec = {"rank": dist.get_rank(), "world": dist.get_world_size(), "mode": args.same_host,
           "workers": args.workers, "times": times, "samples": samples, "bytes": nbytes,
           "cpu_user": u1 - u0, "cpu_sys": s1 - s0,
           "net_bytes_in": st["net_bytes_in"], "net_bytes_lent": st["net_bytes_lent"],
           "peers_same_host": st["peers_same_host"]}
    del dl, ds
    with open(args.out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
