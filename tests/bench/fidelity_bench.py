#!/usr/bin/python3
"""Training fidelity (issues 14 and 23): does hdmlp's delivery order change what a model learns?

    PYTHONPATH=BUILD/python /usr/bin/python3 tests/bench/fidelity_bench.py --build BUILD \
        [--out DIR] [--work DIR] [--seeds 8] [--epochs 4] [--subset 12800] \
        [--tasks fmnist,sorted,imbalanced,imbalanced-sorted] [--orders a,b,...] [--resume]

Trains the same small MLP (784-128-10, SGD with momentum 0.9, lr 0.05 decayed to 0 by a
per-step cosine, same initialisation per seed, same batch size, same number of steps) once
per (task, order, seed) and records test accuracy after every epoch, the per-class recall
at the end, the training loss every few steps, the delivered order's randomness figures
(order_figures.py: same-chunk distance, epoch-position correlation, Spearman against
storage, storage-neighbour fraction) and, for hdmlp, the loader's bytes read. Orders:
  permutation   a fresh random permutation each epoch, each sample read from its own file
                (torch DataLoader(shuffle=True) over the raw files: the ImageFolder pattern)
  strict-K-M    hdmlp.torch.HdmlpIterableDataset, strict order (a uniform permutation each
                epoch, the Brand protocol), chunks of K samples, memory M % of the dataset
  pool-K-M[-rR] hdmlp.torch.HdmlpIterableDataset(order='pool', pool_reads=R): one pass,
                the chunks' read units in a seeded random order, each delivery a uniform
                draw from a pool held in memory M %. R = reads per chunk per epoch (the
                knob: 1 = whole chunks; larger = smaller units = more random). Without -rR,
                R = what pool_reads auto picks for chunks of K ImageNet-size samples
                (~110 KB; units of one 4 MiB device request): 2 at K = 64, 8 at K = 256.
                (Auto on these 50 KB chunks would read whole chunks: that is -r1.)
  recipe-M      the shard recipe (WebDataset's: samples written to shards in a shuffled
                order, 1/16 of the data a shard here, per-epoch shard shuffle per worker,
                2 workers each with a shuffle buffer, the buffers holding M % of the data in
                total): its delivered order generated without I/O by shard_recipe.py's
                recipe_order (the code path of `shard_recipe.py read --order-only`, seed =
                the run's seed), replayed through hdmlp.Dataset in batches of --batch. In
                the class-ordered tasks the shards are written in class order (a recipe user
                who writes shards from a class-sorted listing without shuffling).
  sequential    the packed order, no shuffling (DataLoader(shuffle=False) over
                hdmlp.Dataset): the control
  file-order    the files in their sorted order (classes one after the other), no
                shuffling (shuffled-pack tasks only; in a class-ordered task it is
                `sequential`)
Tasks (Fashion-MNIST images; the order of the samples in storage is what differs):
  fmnist             the first --subset/10 training images of each class, packed as users
                     do (hdmlp-pack shuffles globally): chunk membership is random
  sorted             the same samples packed in class order, so every chunk holds one class
                     and chunk clustering becomes label clustering
  imbalanced         heavy class imbalance: Shirt (the class most confused with others: T-shirt,
                     Pullover, Coat) is 50 % of the data, each other class 1/18 (--subset/20
                     images each: 5,760 + 9 x 640 = 11,520 at --subset 12800), packed as
                     users do
  imbalanced-sorted  the imbalanced samples packed in class order
  The test split is the whole balanced 10,000-image one, so accuracy there is the balanced
  accuracy (the mean per-class recall); the runs also record each class's recall
  (for the imbalanced tasks the report shows the minority classes' mean recall).
hdmlp-pack has no no-shuffle option; its shuffle depends only on (sample count, seed)
applied to the key-sorted inputs, so the bench packs a list of links whose key ranks are
the inverse of that shuffle (checked: labels must come out sorted).
Raw 28x28 bytes, one file each, packed with --compress none at K = 64 and 256, pack seed 1.
Seed s fixes the model's initialisation and the order's seed (hdmlp seed, permutation
generator, recipe seed). Output: OUT/runs.jsonl (one line per run), OUT/bench.jsonl
(hdmlp-bench --json per hdmlp order for the first seed, strict with whole-chunk refills;
the recipe's shards and buffers), OUT/config.json. Render with fidelity_report.py.
Runs go seed by seed (every task and order for seed 0, then seed 1, ...), so an
interrupted run has every order at fewer seeds; --resume keeps OUT/runs.jsonl's runs and
runs only the missing ones.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order_figures  # noqa: E402  (tests/bench: one code path for the randomness figures)
import shard_recipe  # noqa: E402  (tests/bench: the shard recipe's order, --order-only's code)

IDX_CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]  # IDX label order
CLASSES = sorted(IDX_CLASSES)  # hdmlp-pack numbers labels in bytewise name order
LABEL_OF_IDX = bytes([CLASSES.index(name) for name in IDX_CLASSES] + [255] * 246)
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST train set
PIXELS = 28 * 28
PACK_SEED = 1
KS = (64, 256)
DEFAULT_K, DEFAULT_MEM = 64, 25
MAJORITY = CLASSES.index("Shirt")  # the imbalanced tasks' 50 % class
# (variant of the raw data, packed in class order?)
TASKS = {"fmnist": ("balanced", False), "sorted": ("balanced", True),
         "imbalanced": ("imbalanced", False), "imbalanced-sorted": ("imbalanced", True)}
PREFIX = {("balanced", False): "fmnist", ("balanced", True): "sorted",
          ("imbalanced", False): "imb", ("imbalanced", True): "imb-sorted"}
RAW_DIR = {"balanced": "raw", "imbalanced": "raw-imb"}
# pool-K-M without -rR: pool_reads auto's choice for chunks of K ImageNet-size samples
IMAGE_SAMPLE_BYTES = 110_000
DEVICE_REQUEST = 4 << 20
RECIPE_WORKERS, RECIPE_INITIAL = 2, 100


def die(msg):
    sys.exit(f"fidelity_bench: {msg}")


def image_reads(k):
    """hdmlp's auto read unit (loader_pool_unit) for K samples of ~110 KB, 4 MiB requests."""
    mean = k * IMAGE_SAMPLE_BYTES
    return max(1, -(-(mean + mean // 8) // DEVICE_REQUEST))


def parse_order(order):
    """{'mode', 'k', 'mem', 'reads'} of an order name (die on a malformed one)."""
    parts = order.split("-")
    try:
        if order in ("permutation", "sequential", "file-order"):
            return {"mode": order, "k": DEFAULT_K, "mem": None, "reads": None}
        if parts[0] == "strict" and len(parts) == 3:
            return {"mode": "strict", "k": int(parts[1]), "mem": int(parts[2]), "reads": None}
        if parts[0] == "pool" and len(parts) in (3, 4):
            k = int(parts[1])
            reads = int(parts[3][1:]) if len(parts) == 4 and parts[3][0] == "r" else None
            if len(parts) == 4 and reads is None:
                raise ValueError
            return {"mode": "pool", "k": k, "mem": int(parts[2]),
                    "reads": reads if reads is not None else image_reads(k)}
        if parts[0] == "recipe" and len(parts) == 2:
            return {"mode": "recipe", "k": DEFAULT_K, "mem": int(parts[1]), "reads": None}
    except (ValueError, IndexError):
        pass
    if parts[0] == "relaxed":
        die(f"order {order!r}: relaxed mode is gone (it is the pool order now: pool-K-M-r1 "
            "reads whole chunks as relaxed did)")
    die(f"unknown order {order!r} (permutation, strict-K-M, pool-K-M[-rR], recipe-M, "
        "sequential, file-order)")


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


def class_counts(args, variant):
    if variant == "balanced":
        return [args.subset // len(CLASSES)] * len(CLASSES)
    few = args.subset // 20
    return [few * 9 if c == MAJORITY else few for c in range(len(CLASSES))]


def write_raw_tree(args, work, variant, counts):
    """work/RAW/NNNNNN: the first counts[c] training images of each class c, in class order.
    Returns the label of each raw file."""
    raw = os.path.join(work, RAW_DIR[variant])
    labels = [c for c in range(len(CLASSES)) for _ in range(counts[c])]
    stamp = os.path.join(work, f"{RAW_DIR[variant]}-{'-'.join(map(str, counts))}.done")
    if os.path.isfile(stamp):
        return labels
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    images, train_labels = load_split(args.src, "train")
    chosen = [[] for _ in CLASSES]
    for i, c in enumerate(train_labels):
        if len(chosen[c]) < counts[c]:
            chosen[c].append(i)
    short = [CLASSES[c] for c in range(len(CLASSES)) if len(chosen[c]) < counts[c]]
    if short:
        die(f"--subset {args.subset}: too few training images of {', '.join(short)} for "
            f"the {variant} data ({counts})")
    j = 0
    for c in range(len(CLASSES)):
        for i in chosen[c]:
            with open(os.path.join(raw, f"{j:06d}"), "wb") as f:
                f.write(images[i * PIXELS:(i + 1) * PIXELS])
            j += 1
    for old in os.listdir(work):  # the stamp of another subset no longer holds
        if old.startswith(RAW_DIR[variant] + "-") and old.endswith(".done"):
            os.unlink(os.path.join(work, old))
    with open(stamp, "w") as f:
        f.write("ok\n")
    return labels


def pack(args, list_path, out, k):
    if os.path.isfile(os.path.join(out, "index")):
        return
    cmd = [args.pack, "--quiet", "--force", "--seed", str(PACK_SEED), "--compress", "none",
           "--chunk-size", str(k), "-o", out, "--list", list_path]
    subprocess.run(cmd, check=True)


def prepare_variant(args, variant):
    """Raw files, the shuffled packs and the class-ordered packs of one variant.
    Returns ({class_ordered: {K: pack}}, labels of the raw files)."""
    work = args.work
    counts = class_counts(args, variant)
    labels_raw = write_raw_tree(args, work, variant, counts)
    n = len(labels_raw)
    raw = RAW_DIR[variant]
    tag = f"n{n}"
    shuffled_list = os.path.join(work, f"{PREFIX[(variant, False)]}-{tag}.tsv")
    with open(shuffled_list, "w") as f:
        for j in range(n):
            f.write(f"{raw}/{j:06d}\t{CLASSES[labels_raw[j]]}\n")
    packs = {False: {}, True: {}}
    for k in KS:
        out = os.path.join(work, f"{PREFIX[(variant, False)]}-{tag}-K{k}.hdmlp")
        pack(args, shuffled_list, out, k)
        packs[False][k] = out
    # The packer's shuffle: packed position p holds the input of key rank perm[p].
    ds = hdmlp.Dataset(packs[False][DEFAULT_K])
    perm = [int(ds.info(p)["key"][-6:]) for p in range(len(ds))]
    labels = list(ds.labels)
    classes = list(ds.classes)
    ds.close()
    if sorted(perm) != list(range(n)):
        die(f"{packs[False][DEFAULT_K]}: keys are not {raw}/000000..{raw}/{n - 1:06d}")
    if classes != CLASSES or any(labels[p] != labels_raw[perm[p]] for p in range(n)):
        die(f"{packs[False][DEFAULT_K]}: classes {classes} or labels differ from the "
            f"list file's (expected {CLASSES})")
    links = os.path.join(work, f"links-{variant}-{tag}")
    if not os.path.isdir(links):
        tmp = links + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for p in range(n):  # key rank perm[p] -> raw file p, so packed position p = raw p
            os.symlink(os.path.join("..", raw, f"{p:06d}"), os.path.join(tmp, f"{perm[p]:06d}"))
        os.rename(tmp, links)
    inverse = [0] * n
    for p in range(n):
        inverse[perm[p]] = p
    sorted_list = os.path.join(work, f"{PREFIX[(variant, True)]}-{tag}.tsv")
    with open(sorted_list, "w") as f:
        for j in range(n):
            f.write(f"{os.path.basename(links)}/{j:06d}\t{CLASSES[labels_raw[inverse[j]]]}\n")
    for k in KS:
        out = os.path.join(work, f"{PREFIX[(variant, True)]}-{tag}-K{k}.hdmlp")
        pack(args, sorted_list, out, k)
        packs[True][k] = out
        ds = hdmlp.Dataset(out)
        labels = list(ds.labels)
        with open(os.path.join(work, raw, f"{n - 1:06d}"), "rb") as f:
            same = bytes(ds[n - 1]) == f.read()
        ds.close()
        if labels != labels_raw or not same:
            die(f"{out}: not in class order (hdmlp-pack's shuffle is no longer a function "
                "of the sample count and seed alone); the class-ordered task cannot be built")
    return packs, labels_raw


def prepare(args, tasks):
    """{task: {'packs': {K: path}, 'labels_raw': [...], 'packed_of_raw': [...], 'n': N,
    'class_ordered': bool}}"""
    os.makedirs(args.work, exist_ok=True)
    done = {}
    out = {}
    for task in tasks:
        variant, class_ordered = TASKS[task]
        if variant not in done:
            done[variant] = prepare_variant(args, variant)
        packs, labels_raw = done[variant]
        n = len(labels_raw)
        ds = hdmlp.Dataset(packs[class_ordered][DEFAULT_K])
        m = [0] * n  # the packed index of each raw file
        for p in range(len(ds)):
            m[p if class_ordered else int(ds.info(p)["key"][-6:])] = p
        ds.close()
        out[task] = {"packs": packs[class_ordered], "labels_raw": labels_raw, "n": n,
                     "packed_of_raw": m, "class_ordered": class_ordered, "variant": variant}
    return out


class RawFiles(Dataset):
    """One file per sample (the per-file pattern): (uint8 tensor, label, packed index)."""

    def __init__(self, work, variant, labels_raw, packed_of_raw):
        self.paths = [os.path.join(work, RAW_DIR[variant], f"{j:06d}")
                      for j in range(len(labels_raw))]
        self.labels = labels_raw
        self.packed_of_raw = packed_of_raw

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, j):
        with open(self.paths[j], "rb") as f:
            data = f.read()
        return (torch.frombuffer(bytearray(data), dtype=torch.uint8), self.labels[j],
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
    """Batches in a recorded order: epochs_ids[e] lists packed indices; the third element
    of a batch is figure_ids[e]'s entries (the storage positions the figures use) when
    given, else the packed indices."""

    def __init__(self, packed, epochs_ids, batch, figure_ids=None):
        self.packed, self.epochs_ids, self.batch, self.epoch = packed, epochs_ids, batch, 0
        self.figure_ids = figure_ids

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        ids = self.epochs_ids[self.epoch]
        shown = self.figure_ids[self.epoch] if self.figure_ids is not None else ids
        for b in range(0, len(ids) - self.batch + 1, self.batch):  # full batches
            items = [self.packed[i] for i in ids[b:b + self.batch]]
            yield (torch.stack([x for x, _, _ in items]),
                   torch.tensor([y for _, y, _ in items]), torch.tensor(shown[b:b + self.batch]))


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


def batch_class_share(batches_labels):
    """Mean over batches of the most frequent class's share of the batch."""
    shares = [torch.bincount(y).max().item() / len(y) for y in batches_labels]
    return sum(shares) / len(shares)


def bench_ids(args, path, seed, spec, out_dir):
    """hdmlp-bench's order and figures for one configuration (JSON dict, list of epochs)."""
    mode = spec["mode"]
    ids_file = os.path.join(out_dir, f"ids-{os.path.basename(path)}-m{spec['mem']}-s{seed}"
                            f"-{mode}{spec['reads'] or ''}.txt")
    cmd = [args.bench, path, "--memory", f"{spec['mem']}%", "--batch", str(args.batch),
           "--epochs", str(args.epochs), "--seed", str(seed), "--json", "--quiet",
           "--ids", ids_file, "--order", mode]
    if mode == "pool":
        cmd += ["--pool-reads", str(spec["reads"])]
    else:
        cmd += ["--refill", "whole"]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    stats = json.loads(res.stdout)
    with open(ids_file) as f:
        epochs = [[int(t) for t in line.split()] for line in f if line.strip()]
    os.unlink(ids_file)
    if len(epochs) != args.epochs:
        die(f"{' '.join(cmd)}: {len(epochs)} epochs of indices, expected {args.epochs}")
    return stats, epochs, cmd


def recipe_positions(args, data, mem, seed):
    """The shard recipe's delivered order: (storage positions per epoch, raw index of each
    storage position, shards, buffer size per worker)."""
    n = data["n"]
    # storage order: shuffled (the recipe's writer) or, in class-ordered tasks, class order
    perm = list(range(n)) if data["class_ordered"] else shard_recipe.write_permutation(n, PACK_SEED)
    sizes = [PIXELS] * n
    memory = shard_recipe.parse_memory(f"{mem}%", sum(sizes))
    epochs = shard_recipe.recipe_order(sizes, memory=memory, workers=RECIPE_WORKERS,
                                       batch=args.batch, seed=seed, epochs=args.epochs,
                                       initial=RECIPE_INITIAL)
    bounds = shard_recipe.shard_bounds(sizes)
    return epochs, perm, len(bounds), shard_recipe.buffer_size(memory, RECIPE_WORKERS, PIXELS)


def make_order(args, task, order, seed, data):
    """(iterable yielding (x uint8, y, storage positions) batches, set_epoch or None,
    stats function or None, K for the randomness figures)."""
    spec = parse_order(order)
    mode, k = spec["mode"], spec["k"]
    if mode in ("permutation", "file-order"):
        if mode == "file-order" and data["class_ordered"]:
            die(f"{task}: file-order is the packed order here (use sequential)")
        raw = RawFiles(args.work, data["variant"], data["labels_raw"], data["packed_of_raw"])
        gen = torch.Generator()
        gen.manual_seed(seed)
        loader = DataLoader(raw, batch_size=args.batch, shuffle=mode == "permutation",
                            generator=gen, drop_last=True)
        return loader, None, None, k
    if mode == "sequential":
        loader = DataLoader(Packed(data["packs"][DEFAULT_K]), batch_size=args.batch,
                            shuffle=False, drop_last=True)
        return loader, None, None, k
    if mode in ("strict", "pool"):
        extra = {"order": "pool", "pool_reads": spec["reads"]} if mode == "pool" else {}
        ds = hdmlp.torch.HdmlpIterableDataset(data["packs"][k], args.batch, f"{spec['mem']}%",
                                              seed=seed, with_indices=True, drop_last=True,
                                              **extra)
        return DataLoader(ds, batch_size=None), ds.set_epoch, ds.stats, k
    if mode == "recipe":
        epochs, perm, _, _ = recipe_positions(args, data, spec["mem"], seed)
        por = data["packed_of_raw"]
        packed_ids = [[por[perm[p]] for p in e] for e in epochs]
        ds = Replay(Packed(data["packs"][DEFAULT_K]), packed_ids, args.batch, figure_ids=epochs)
        return ds, ds.set_epoch, None, k
    die(f"unknown order {order!r}")


def evaluate(model, x, y):
    """(accuracy, loss, recall of each class) on the test split."""
    model.eval()
    with torch.no_grad():
        out = model(x)
        pred = out.argmax(1)
        acc = (pred == y).float().mean().item()
        loss = F.cross_entropy(out, y).item()
        recall = [((pred == c) & (y == c)).sum().item() / max(1, (y == c).sum().item())
                  for c in range(len(CLASSES))]
    model.train()
    return acc, loss, recall


def run_one(args, task, order, seed, data, test_x, test_y):
    t0 = time.monotonic()
    loader, set_epoch, stats_fn, k = make_order(args, task, order, seed, data)
    torch.manual_seed(seed)
    model = Net(args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = data["n"] // args.batch
    total_steps = steps_per_epoch * args.epochs
    sched = None
    if args.schedule == "cosine":  # per step, from lr to 0 over the whole run
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 0.5 * (1 + math.cos(math.pi * step / total_steps)))
    window = max(1, steps_per_epoch // args.loss_points)
    acc, test_loss, epoch_loss, loss_curve, epochs_ids, batch_labels = [], [], [], [], [], []
    steps = samples = 0
    recall = None
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
        a, tl, recall = evaluate(model, test_x, test_y)
        acc.append(a)
        test_loss.append(tl)
    figs = order_figures.figures(epochs_ids, k=k, n=data["n"])
    minority = [recall[c] for c in range(len(CLASSES)) if c != MAJORITY]
    run = {"task": task, "order": order, "seed": seed, "epochs": args.epochs,
           "steps": steps, "samples": samples, "accuracy": acc, "test_loss": test_loss,
           "train_loss": epoch_loss, "loss_curve": loss_curve, "loss_window": window,
           "class_recall": recall, "majority_recall": recall[MAJORITY],
           "minority_recall": sum(minority) / len(minority), "worst_recall": min(recall),
           "same_chunk_distance": figs["same_chunk_distance"],
           "epoch_position_correlation": figs["epoch_position_correlation"],
           "spearman_storage": figs["spearman_storage"],
           "neighbour_fraction": figs["neighbour_fraction"], "k": k,
           "batch_class_share": batch_class_share(batch_labels),
           "seconds": time.monotonic() - t0}
    spec = parse_order(order)
    if spec["reads"]:
        run["pool_reads"] = spec["reads"]
    if stats_fn is not None:
        st = stats_fn()
        run["stats"] = {key: st[key] for key in ("bytes_read", "bytes_delivered",
                                                 "chunk_loads", "pool_unit") if key in st}
    if order in (f"strict-{DEFAULT_K}-{DEFAULT_MEM}", f"pool-{DEFAULT_K}-{DEFAULT_MEM}") \
            and seed == args.seed0:
        # the Python API and hdmlp-bench must deliver the same order for the same settings
        _, bench_epochs, _ = bench_ids(args, data["packs"][k], seed, spec, args.out)
        run["same_order_as_hdmlp_bench"] = bench_epochs == epochs_ids
    return run


def bench_figures(args, data, orders, task):
    """hdmlp-bench --json for each hdmlp order (first seed): loads per chunk and read
    amplification (strict with whole-chunk refills), figures; the recipe's shards."""
    rows = []
    for order in orders:
        spec = parse_order(order)
        if spec["mode"] in ("strict", "pool"):
            stats, _, cmd = bench_ids(args, data[task]["packs"][spec["k"]], args.seed0, spec,
                                      args.out)
            rows.append({"task": task, "order": order, "bench": stats,
                         "command": " ".join(os.path.basename(c) if c == args.bench else c
                                             for c in cmd if not c.startswith(args.out))})
        elif spec["mode"] == "recipe":
            _, _, shards, bufsize = recipe_positions(args, data[task], spec["mem"], args.seed0)
            rows.append({"task": task, "order": order,
                         "recipe": {"shards": shards, "workers": RECIPE_WORKERS,
                                    "buffer_per_worker": bufsize, "initial": RECIPE_INITIAL,
                                    "reads_per_epoch": shards,
                                    "class_ordered_shards": data[task]["class_ordered"]}})
    return rows


def default_orders(task):
    orders = ["permutation", f"strict-{DEFAULT_K}-{DEFAULT_MEM}", f"pool-{DEFAULT_K}-{DEFAULT_MEM}",
              f"pool-{DEFAULT_K}-{DEFAULT_MEM}-r1", f"pool-{DEFAULT_K}-{DEFAULT_MEM}-r8",
              f"recipe-{DEFAULT_MEM}", f"strict-{DEFAULT_K}-10", f"pool-{DEFAULT_K}-10",
              f"pool-{DEFAULT_K}-10-r8", "recipe-10", "strict-256-10", "pool-256-10",
              "pool-256-10-r32", "sequential"]
    if not TASKS[task][1]:
        orders.append("file-order")
    return orders


def blas_library():
    """The BLAS library this process mapped (torch's matrix products run on it)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
        return sorted(libs)
    except OSError:
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="CMake build tree (hdmlp-pack, hdmlp-bench)")
    ap.add_argument("--out", default="bench-fidelity-out")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/var/tmp"),
                                                   "hdmlp-fidelity-bench"))
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--seed0", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--subset", type=int, default=12800,
                    help="training images of the balanced tasks, the same number per class "
                    "(default 12800; the imbalanced tasks take 9/10 of it)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                    help="learning rate: cosine decay to 0 over the run (default) or constant")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--loss-points", type=int, default=10, help="loss points per epoch")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--orders", default=None, help="comma-separated (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs already in OUT/runs.jsonl and run the missing ones")
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
        if t not in TASKS:
            die(f"--tasks: unknown task {t!r} ({', '.join(TASKS)})")
    orders_of = {t: args.orders.split(",") if args.orders else default_orders(t) for t in tasks}
    for t in tasks:
        for o in orders_of[t]:
            parse_order(o)
        if TASKS[t][1] and "file-order" in orders_of[t]:
            orders_of[t].remove("file-order")  # the packed order there: `sequential`
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    data = prepare(args, tasks)
    print(f"data ready in {time.monotonic() - t0:.1f} s in {args.work}", flush=True)
    test_images, test_labels = load_split(args.src, "test")
    test_x = normalise(torch.frombuffer(bytearray(test_images), dtype=torch.uint8)
                       .view(-1, PIXELS))
    test_y = torch.frombuffer(bytearray(test_labels), dtype=torch.uint8).long()
    config = {k: v for k, v in vars(args).items()}
    config.update(pack_seed=PACK_SEED, test_samples=len(test_y),
                  samples={t: data[t]["n"] for t in tasks},
                  class_counts={t: [data[t]["labels_raw"].count(c) for c in range(len(CLASSES))]
                                for t in tasks},
                  classes=CLASSES, majority=CLASSES[MAJORITY],
                  per_class=args.subset // len(CLASSES),
                  torch=torch.__version__, hdmlp=hdmlp.__version__, blas=blas_library(),
                  model=f"MLP {PIXELS}-{args.hidden}-{len(CLASSES)}, SGD momentum 0.9, "
                  f"lr {args.lr} ({args.schedule}), batch {args.batch}",
                  orders_of=orders_of,
                  pool_reads_default={k: image_reads(k) for k in KS})
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    runs_path = os.path.join(args.out, "runs.jsonl")
    done = set()
    if args.resume and os.path.isfile(runs_path):
        with open(runs_path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    done.add((r["task"], r["order"], r["seed"]))
        print(f"--resume: {len(done)} runs kept from {runs_path}", flush=True)
    todo = [(seed, task, order) for seed in range(args.seed0, args.seed0 + args.seeds)
            for task in tasks for order in orders_of[task] if (task, order, seed) not in done]
    print(f"{len(todo)} runs to go", flush=True)
    with open(runs_path, "a" if args.resume else "w") as out:
        for i, (seed, task, order) in enumerate(todo):
            run = run_one(args, task, order, seed, data[task], test_x, test_y)
            out.write(json.dumps(run) + "\n")
            out.flush()
            extra = (f"  minority recall {run['minority_recall']:.4f}"
                     if TASKS[task][0] == "imbalanced" else "")
            print(f"[{i + 1}/{len(todo)} {(time.monotonic() - t0) / 60:.1f} min] {task:<17} "
                  f"{order:<14} seed {seed}: accuracy "
                  f"{' '.join(f'{a:.4f}' for a in run['accuracy'])}{extra}  same-chunk "
                  f"{run['same_chunk_distance']:.3f}  {run['seconds']:.1f} s", flush=True)
    with open(os.path.join(args.out, "bench.jsonl"), "w") as out:
        for task in tasks:
            for row in bench_figures(args, data, orders_of[task], task):
                out.write(json.dumps(row) + "\n")
    print(f"done in {time.monotonic() - t0:.0f} s: {runs_path}", flush=True)


if __name__ == "__main__":
    main()
