#!/usr/bin/python3
"""Training fidelity (issue 14): does hdmlp's delivery order change what a model learns?

    PYTHONPATH=BUILD/python /usr/bin/python3 tests/bench/fidelity_bench.py --build BUILD \
        [--out DIR] [--work DIR] [--seeds 5] [--epochs 4] [--subset 12800] \
        [--tasks fmnist,sorted] [--orders a,b,...]

Trains the same small MLP (784-128-10, SGD with momentum 0.9, lr 0.05 decayed to 0 by a
per-step cosine, same initialisation per seed, same batch size, same number of steps) once per (task, order, seed) and records test
accuracy after every epoch, the training loss every few steps, the delivered indices'
randomness figures and, for hdmlp, the loader's bytes read. Orders:
  permutation   a fresh random permutation each epoch, each sample read from its own file
                (torch DataLoader(shuffle=True) over the raw files: the ImageFolder pattern)
  strict-K-M    hdmlp.torch.HdmlpIterableDataset, strict protocol, chunks of K samples,
                memory M % of the dataset (K in 16/64/256, M in 10/25/50)
  relaxed-64-25 hdmlp relaxed mode at K = 64 and 25 %: the Python API has no relaxed
                switch, so the order hdmlp-bench --relaxed --ids delivers (same dataset,
                seed, batch size and memory) is replayed through hdmlp.Dataset
  sequential    the packed order, no shuffling (DataLoader(shuffle=False) over
                hdmlp.Dataset): the control
  file-order    the files in their sorted order (classes one after the other), no
                shuffling (fmnist only; in `sorted` it is the packed order)
Tasks (the same images; only the packing differs):
  fmnist  Fashion-MNIST packed as users do (hdmlp-pack shuffles globally): chunk
          membership is random
  sorted  the same samples packed in class order, so every chunk holds one class and the
          protocol's chunk clustering becomes label clustering. hdmlp-pack has no
          no-shuffle option; its shuffle depends only on (sample count, seed) applied to
          the key-sorted inputs, so the bench packs a list of links whose key ranks are
          the inverse of that shuffle (checked: labels must come out sorted).
Subset: the first --subset/10 training images of each class (raw 28x28 bytes, one file
each, packed with --compress none), the whole 10,000-image test split. Seed s fixes the
model's initialisation and the order's seed (hdmlp seed, permutation generator); the packs
use seed 1. Output: OUT/runs.jsonl (one line per run),
OUT/bench.jsonl (hdmlp-bench --json per hdmlp order: loads per chunk with whole-chunk
refills, same_chunk_distance), OUT/config.json. Render with fidelity_report.py.
"""
import argparse
import gzip
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import hdmlp
import hdmlp.torch

IDX_CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]  # IDX label order
CLASSES = sorted(IDX_CLASSES)  # hdmlp-pack numbers labels in bytewise name order
LABEL_OF_IDX = bytes([CLASSES.index(name) for name in IDX_CLASSES] + [255] * 246)
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST train set
PIXELS = 28 * 28
PACK_SEED = 1
KS = (16, 64, 256)
MEMS = (10, 25, 50)
DEFAULT_K, DEFAULT_MEM = 64, 25


def die(msg):
    sys.exit(f"fidelity_bench: {msg}")


def read_idx(path, want_magic):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic != want_magic:
            die(f"{path}: bad IDX magic {magic:#x} (expected {want_magic:#x})")
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range((magic & 0xFF) - 1)]
        item = 1
        for d in dims:
            item *= d
        data = f.read(n * item)
        if len(data) != n * item:
            die(f"{path}: truncated ({len(data)} of {n * item} bytes)")
        return n, item, data


def load_split(src, split):
    stem = "train" if split == "train" else "t10k"
    n, item, images = read_idx(os.path.join(src, f"{stem}-images-idx3-ubyte.gz"), 0x803)
    n2, _, labels = read_idx(os.path.join(src, f"{stem}-labels-idx1-ubyte.gz"), 0x801)
    if n != n2 or item != PIXELS:
        die(f"{src}: {split} has {n} images of {item} bytes and {n2} labels")
    return images, labels.translate(LABEL_OF_IDX)  # labels as hdmlp numbers them


def write_raw_tree(args, work):
    """work/raw/NNNNNN: the subset in class order (file j has label j // per_class)."""
    per_class = args.subset // len(CLASSES)
    raw = os.path.join(work, "raw")
    stamp = os.path.join(work, f"raw-{args.subset}.done")
    if os.path.isfile(stamp):
        return per_class
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    images, labels = load_split(args.src, "train")
    taken = [0] * len(CLASSES)
    chosen = [[] for _ in CLASSES]
    for i, c in enumerate(labels):
        if taken[c] < per_class:
            taken[c] += 1
            chosen[c].append(i)
    if min(taken) < per_class:
        die(f"--subset {args.subset}: only {min(taken)} training images in some class")
    j = 0
    for c in range(len(CLASSES)):
        for i in chosen[c]:
            with open(os.path.join(raw, f"{j:06d}"), "wb") as f:
                f.write(images[i * PIXELS:(i + 1) * PIXELS])
            j += 1
    with open(stamp, "w") as f:
        f.write("ok\n")
    return per_class


def pack(args, work, list_path, out):
    if os.path.isfile(os.path.join(out, "index")):
        return
    cmd = [args.pack, "--quiet", "--force", "--seed", str(PACK_SEED), "--compress", "none",
           "--chunk-size", str(out_k(out)), "-o", out, "--list", list_path]
    subprocess.run(cmd, check=True)


def out_k(path):
    return int(path.rsplit("-K", 1)[1].split(".")[0])


def prepare(args):
    """Raw files, the shuffled packs (fmnist) and the class-ordered packs (sorted)."""
    work = args.work
    os.makedirs(work, exist_ok=True)
    per_class = write_raw_tree(args, work)
    n = args.subset
    tag = f"n{n}"
    shuffled_list = os.path.join(work, f"fmnist-{tag}.tsv")
    with open(shuffled_list, "w") as f:
        for j in range(n):
            f.write(f"raw/{j:06d}\t{CLASSES[j // per_class]}\n")
    packs = {"fmnist": {}, "sorted": {}}
    for k in KS:
        out = os.path.join(work, f"fmnist-{tag}-K{k}.hdmlp")
        pack(args, work, shuffled_list, out)
        packs["fmnist"][k] = out
    # The packer's shuffle: packed position p holds the input of key rank perm[p].
    ds = hdmlp.Dataset(packs["fmnist"][DEFAULT_K])
    perm = [int(ds.info(p)["key"][-6:]) for p in range(len(ds))]
    labels = list(ds.labels)
    classes = list(ds.classes)
    ds.close()
    if sorted(perm) != list(range(n)):
        die(f"{packs['fmnist'][DEFAULT_K]}: keys are not raw/000000..raw/{n - 1:06d}")
    if classes != CLASSES or any(labels[p] != perm[p] // per_class for p in range(n)):
        die(f"{packs['fmnist'][DEFAULT_K]}: classes {classes} or labels differ from the "
            f"list file's (expected {CLASSES})")
    links = os.path.join(work, f"links-{tag}")
    if not os.path.isdir(links):
        tmp = links + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for p in range(n):  # key rank perm[p] -> raw file p, so packed position p = raw p
            os.symlink(os.path.join("..", "raw", f"{p:06d}"), os.path.join(tmp, f"{perm[p]:06d}"))
        os.rename(tmp, links)
    inverse = [0] * n
    for p in range(n):
        inverse[perm[p]] = p
    sorted_list = os.path.join(work, f"sorted-{tag}.tsv")
    with open(sorted_list, "w") as f:
        for j in range(n):
            f.write(f"links-{tag}/{j:06d}\t{CLASSES[inverse[j] // per_class]}\n")
    for k in KS:
        out = os.path.join(work, f"sorted-{tag}-K{k}.hdmlp")
        pack(args, work, sorted_list, out)
        packs["sorted"][k] = out
        ds = hdmlp.Dataset(out)
        labels = list(ds.labels)
        raw0 = open(os.path.join(work, "raw", f"{n - 1:06d}"), "rb").read()
        same = bytes(ds[n - 1]) == raw0
        ds.close()
        if labels != sorted(labels) or not same:
            die(f"{out}: not in class order (hdmlp-pack's shuffle is no longer a function "
                "of the sample count and seed alone); the sorted task cannot be built")
    return packs, per_class


class RawFiles(Dataset):
    """One file per sample (the per-file pattern): (uint8 tensor, label, packed index)."""

    def __init__(self, work, n, per_class, packed_of_raw):
        self.paths = [os.path.join(work, "raw", f"{j:06d}") for j in range(n)]
        self.per_class = per_class
        self.packed_of_raw = packed_of_raw

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, j):
        with open(self.paths[j], "rb") as f:
            data = f.read()
        return (torch.frombuffer(bytearray(data), dtype=torch.uint8), j // self.per_class,
                self.packed_of_raw[j])


class Packed(Dataset):
    """Random access into a packed dataset (hdmlp.Dataset), by packed index."""

    def __init__(self, path):
        self.ds = hdmlp.Dataset(path)
        self.labels = list(self.ds.labels)

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return torch.frombuffer(bytearray(self.ds[i]), dtype=torch.uint8), self.labels[i], i


class Replay(torch.utils.data.IterableDataset):
    """Batches in a recorded order (one list of packed indices per epoch)."""

    def __init__(self, packed, epochs_ids, batch):
        self.packed, self.epochs_ids, self.batch, self.epoch = packed, epochs_ids, batch, 0

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        ids = self.epochs_ids[self.epoch]
        for b in range(0, len(ids), self.batch):
            items = [self.packed[i] for i in ids[b:b + self.batch]]
            yield (torch.stack([x for x, _, _ in items]),
                   torch.tensor([y for _, y, _ in items]), torch.tensor([i for _, _, i in items]))


class Net(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, hidden)
        self.fc2 = nn.Linear(hidden, len(CLASSES))

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def normalise(x):
    """uint8 (batch, 784) -> float, the same for every order."""
    return x.float().div_(255.0).sub_(MEAN).div_(STD)


def same_chunk_distance(epochs_ids, k):
    """hdmlp-bench's figure (loader/bench/bench_random.h) from packed indices."""
    dist = norm = 0.0
    for ids in epochs_ids:
        count, total = {}, {}
        for pos, i in enumerate(ids):
            c = i // k
            n, s = count.get(c, 0), total.get(c, 0)
            dist += n * pos - s
            count[c], total[c] = n + 1, s + pos
        pairs = sum(n * (n - 1) / 2 for n in count.values())
        norm += pairs * (len(ids) + 1) / 3
    return dist / norm if norm else float("nan")


def batch_class_share(batches_labels):
    """Mean over batches of the most frequent class's share of the batch."""
    shares = [torch.bincount(y).max().item() / len(y) for y in batches_labels]
    return sum(shares) / len(shares)


def bench_ids(args, path, seed, k, mem, relaxed, out_dir):
    """hdmlp-bench's order and figures for one configuration (JSON dict, list of epochs)."""
    ids_file = os.path.join(out_dir, f"ids-{os.path.basename(path)}-m{mem}-s{seed}"
                            f"{'-relaxed' if relaxed else ''}.txt")
    cmd = [args.bench, path, "--memory", f"{mem}%", "--batch", str(args.batch), "--epochs",
           str(args.epochs), "--seed", str(seed), "--refill", "whole", "--json", "--quiet",
           "--ids", ids_file]
    if relaxed:
        cmd.append("--relaxed")
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    stats = json.loads(res.stdout)
    with open(ids_file) as f:
        epochs = [[int(t) for t in line.split()] for line in f if line.strip()]
    os.unlink(ids_file)
    if len(epochs) != args.epochs:
        die(f"{' '.join(cmd)}: {len(epochs)} epochs of indices, expected {args.epochs}")
    return stats, epochs


def make_order(args, task, order, seed, packs, per_class, packed_of_raw):
    """(iterable yielding (x uint8, y, packed indices) batches, set_epoch or None,
    stats function or None, K for the randomness figure)."""
    n = args.subset
    if order == "permutation" or order == "file-order":
        data = RawFiles(args.work, n, per_class, packed_of_raw[task])
        gen = torch.Generator()
        gen.manual_seed(seed)
        loader = DataLoader(data, batch_size=args.batch, shuffle=order == "permutation",
                            generator=gen, drop_last=True)
        return loader, None, None, DEFAULT_K
    if order == "sequential":
        loader = DataLoader(Packed(packs[task][DEFAULT_K]), batch_size=args.batch,
                            shuffle=False, drop_last=True)
        return loader, None, None, DEFAULT_K
    mode, k, mem = order.split("-")
    k, mem = int(k), int(mem)
    if mode == "strict":
        ds = hdmlp.torch.HdmlpIterableDataset(packs[task][k], args.batch, f"{mem}%", seed=seed,
                                              with_indices=True, drop_last=True)
        return DataLoader(ds, batch_size=None), ds.set_epoch, ds.stats, k
    if mode == "relaxed":
        _, epochs = bench_ids(args, packs[task][k], seed, k, mem, True, args.out)
        ds = Replay(Packed(packs[task][k]), epochs, args.batch)
        return ds, ds.set_epoch, None, k
    die(f"unknown order {order!r}")


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        out = model(x)
        acc = (out.argmax(1) == y).float().mean().item()
        loss = F.cross_entropy(out, y).item()
    model.train()
    return acc, loss


def run_one(args, task, order, seed, packs, per_class, packed_of_raw, test_x, test_y):
    t0 = time.monotonic()
    loader, set_epoch, stats_fn, k = make_order(args, task, order, seed, packs, per_class,
                                                packed_of_raw)
    torch.manual_seed(seed)
    model = Net(args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = args.subset // args.batch
    total_steps = steps_per_epoch * args.epochs
    sched = None
    if args.schedule == "cosine":  # per step, from lr to 0 over the whole run
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 0.5 * (1 + math.cos(math.pi * step / total_steps)))
    window = max(1, steps_per_epoch // args.loss_points)
    acc, test_loss, epoch_loss, loss_curve, epochs_ids, batch_labels = [], [], [], [], [], []
    steps = samples = 0
    for epoch in range(args.epochs):
        if set_epoch is not None:
            set_epoch(epoch)
        ids, total, count, win = [], 0.0, 0, []
        for x, y, idx in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(normalise(x)), y)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            value = loss.item()
            total, count = total + value, count + 1
            win.append(value)
            if len(win) == window:
                loss_curve.append(sum(win) / len(win))
                win = []
            ids.extend(idx.tolist())
            batch_labels.append(y)
            steps += 1
            samples += len(y)
        if count != steps_per_epoch:
            die(f"{task}/{order} seed {seed} epoch {epoch}: {count} steps, expected "
                f"{steps_per_epoch} (every order must train the same number of steps)")
        epochs_ids.append(ids)
        epoch_loss.append(total / count)
        a, tl = evaluate(model, test_x, test_y)
        acc.append(a)
        test_loss.append(tl)
    run = {"task": task, "order": order, "seed": seed, "epochs": args.epochs,
           "steps": steps, "samples": samples, "accuracy": acc, "test_loss": test_loss,
           "train_loss": epoch_loss, "loss_curve": loss_curve, "loss_window": window,
           "same_chunk_distance": same_chunk_distance(epochs_ids, k), "k": k,
           "batch_class_share": batch_class_share(batch_labels),
           "seconds": time.monotonic() - t0}
    if stats_fn is not None:
        st = stats_fn()
        run["stats"] = {key: st[key] for key in ("bytes_read", "bytes_delivered",
                                                 "chunk_loads") if key in st}
    if order == f"strict-{DEFAULT_K}-{DEFAULT_MEM}" and seed == args.seed0:
        # the Python API and hdmlp-bench must deliver the same order for the same settings
        _, bench_epochs = bench_ids(args, packs[task][k], seed, k, DEFAULT_MEM, False, args.out)
        run["same_order_as_hdmlp_bench"] = bench_epochs == epochs_ids
    return run


def bench_figures(args, packs, orders, tasks):
    """hdmlp-bench --json for each hdmlp order (first seed): loads per chunk and read
    amplification with whole-chunk refills, same_chunk_distance."""
    rows = []
    for task in tasks:
        for order in orders:
            if not order.startswith(("strict-", "relaxed-")):
                continue
            mode, k, mem = order.split("-")
            stats, _ = bench_ids(args, packs[task][int(k)], args.seed0, int(k), int(mem),
                                 mode == "relaxed", args.out)
            rows.append({"task": task, "order": order, "bench": stats})
    return rows


def default_orders(task):
    orders = ["permutation"]
    orders += [f"strict-{k}-{m}" for k in KS for m in MEMS]
    orders += [f"relaxed-{DEFAULT_K}-{DEFAULT_MEM}", "sequential"]
    if task == "fmnist":
        orders.append("file-order")
    return orders


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="CMake build tree (hdmlp-pack, hdmlp-bench)")
    ap.add_argument("--out", default="bench-fidelity-out")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/var/tmp"),
                                                   "hdmlp-fidelity-bench"))
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed0", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--subset", type=int, default=12800,
                    help="training images, the same number per class (default 12800)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                    help="learning rate: cosine decay to 0 over the run (default) or constant")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--loss-points", type=int, default=10, help="loss points per epoch")
    ap.add_argument("--tasks", default="fmnist,sorted")
    ap.add_argument("--orders", default=None, help="comma-separated (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args()

    args.pack = os.path.join(args.build, "packer", "hdmlp-pack")
    args.bench = os.path.join(args.build, "loader", "hdmlp-bench")
    for tool in (args.pack, args.bench):
        if not os.access(tool, os.X_OK):
            die(f"{tool}: not found or not executable (--build BUILD: a built CMake tree)")
    if args.subset <= 0 or args.subset % (len(CLASSES) * args.batch):
        die(f"--subset {args.subset}: must be a positive multiple of 10 x --batch "
            f"({len(CLASSES) * args.batch}) so that every order trains the same full batches")
    tasks = args.tasks.split(",")
    for t in tasks:
        if t not in ("fmnist", "sorted"):
            die(f"--tasks: unknown task {t!r} (fmnist, sorted)")
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    packs, per_class = prepare(args)
    print(f"data ready in {time.monotonic() - t0:.1f} s in {args.work}", flush=True)
    # the packed index of each raw file, per task (for the randomness figures)
    packed_of_raw = {}
    for task in tasks:
        ds = hdmlp.Dataset(packs[task][DEFAULT_K])
        m = [0] * args.subset
        for p in range(len(ds)):
            key = ds.info(p)["key"]
            m[p if task == "sorted" else int(key[-6:])] = p
        packed_of_raw[task] = m
        ds.close()
    test_images, test_labels = load_split(args.src, "test")
    test_x = normalise(torch.frombuffer(bytearray(test_images), dtype=torch.uint8)
                       .view(-1, PIXELS))
    test_y = torch.frombuffer(bytearray(test_labels), dtype=torch.uint8).long()
    config = {k: v for k, v in vars(args).items()}
    config.update(pack_seed=PACK_SEED, per_class=per_class, test_samples=len(test_y),
                  torch=torch.__version__, hdmlp=hdmlp.__version__,
                  model=f"MLP {PIXELS}-{args.hidden}-{len(CLASSES)}, SGD momentum 0.9, "
                  f"lr {args.lr} ({args.schedule}), batch {args.batch}")
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    runs_path = os.path.join(args.out, "runs.jsonl")
    with open(runs_path, "w") as out:
        for task in tasks:
            orders = args.orders.split(",") if args.orders else default_orders(task)
            for order in orders:
                for seed in range(args.seed0, args.seed0 + args.seeds):
                    run = run_one(args, task, order, seed, packs, per_class, packed_of_raw,
                                  test_x, test_y)
                    out.write(json.dumps(run) + "\n")
                    out.flush()
                    print(f"{task:<7} {order:<14} seed {seed}: accuracy "
                          f"{' '.join(f'{a:.4f}' for a in run['accuracy'])}  "
                          f"same-chunk {run['same_chunk_distance']:.3f}  "
                          f"{run['seconds']:.1f} s", flush=True)
    with open(os.path.join(args.out, "bench.jsonl"), "w") as out:
        for row in bench_figures(args, packs, orders_union(args, tasks), tasks):
            out.write(json.dumps(row) + "\n")
    print(f"done in {time.monotonic() - t0:.0f} s: {runs_path}", flush=True)


def orders_union(args, tasks):
    if args.orders:
        return args.orders.split(",")
    seen = []
    for t in tasks:
        for o in default_orders(t):
            if o not in seen:
                seen.append(o)
    return seen


if __name__ == "__main__":
    main()
