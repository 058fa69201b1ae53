#!/usr/bin/python3
"""ImageNet-style training with hdmlp's image pipeline: a small CNN on a folder of JPEG/PNG
images, once with hdmlp (decode, RandomResizedCrop, flip and normalisation on the loader's
C threads) and once with torchvision's ImageFolder + transforms in DataLoader workers, for
a few seeds; prints validation accuracy per run and the mean and spread per pipeline.

    examples/train_images.py TRAIN_DIR VAL_DIR [--size 64] [--epochs 4] [--seeds 0 1 2]
        [--limit-train N] [--workers 2] [--image-max-side N] [--json]

TRAIN_DIR and VAL_DIR are ImageFolder trees (one sub-directory per class, the same class
names in both; tests/bench/image_data.py makes one from photographs Debian ships).
TRAIN_DIR is packed once with hdmlp-pack (--hdmlp-pack, $HDMLP_PACK or PATH) into
--workdir, with --image-max-side N to shrink larger images at pack time.
Both pipelines use the same model, initialisation (per seed), optimiser, batch size and
number of steps; only the training input differs:
  hdmlp        HdmlpIterableDataset(train.hdmlp, image=ImagePipeline(size, NCHW, float32,
               ImageNet normalisation)) -> DataLoader(batch_size=None)
  torchvision  ImageFolder(TRAIN_DIR, RandomResizedCrop(size) + RandomHorizontalFlip +
               ToTensor + Normalize) -> DataLoader(batch_size, shuffle=True, num_workers)
Validation is the same for both: ImageFolder(VAL_DIR) through torchvision's Resize(size /
0.875) + CenterCrop(size).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

import hdmlp
import hdmlp.torch

MEAN, STD = hdmlp.IMAGENET_MEAN, hdmlp.IMAGENET_STD


class Net(nn.Module):
    """Four 3x3 conv + batch-norm blocks, global average pooling, one linear layer."""

    def __init__(self, classes):
        super().__init__()
        chans = (3, 16, 32, 64, 64)
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1, bias=False)
                                   for a, b in zip(chans, chans[1:]))
        self.bns = nn.ModuleList(nn.BatchNorm2d(b) for b in chans[1:])
        self.fc = nn.Linear(chans[-1], classes)

    def forward(self, x):
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            x = F.relu(bn(conv(x)))
            if i < len(self.convs) - 1:
                x = F.max_pool2d(x, 2)
        return self.fc(x.mean((2, 3)))


def subset_dir(src, dst, limit):
    """About `limit` files of src hard-linked under dst: evenly spaced within each class,
    at least one per class (so the class list, and the labels, stay those of src)."""
    classes = sorted(c for c in os.listdir(src) if os.path.isdir(os.path.join(src, c)))
    per = {c: sorted(os.listdir(os.path.join(src, c))) for c in classes}
    total = sum(len(v) for v in per.values())
    for c, files in per.items():
        os.makedirs(os.path.join(dst, c), exist_ok=True)
        want = max(1, round(len(files) * limit / total))
        for f in files[::max(1, len(files) // want)][:want]:
            if not os.path.exists(os.path.join(dst, c, f)):
                os.link(os.path.join(src, c, f), os.path.join(dst, c, f))
    return dst


def pack(args, train):
    name = "train" + (f"-{args.image_max_side}" if args.image_max_side else "") + ".hdmlp"
    out = os.path.join(args.workdir, name)
    if os.path.exists(os.path.join(out, "index")):
        return out
    tool = args.hdmlp_pack or os.environ.get("HDMLP_PACK") or "hdmlp-pack"
    cmd = [tool, "--quiet", "--force", "--seed", "1", "--compress", "none", "-o", out]
    if args.image_max_side:
        cmd += ["--image-max-side", str(args.image_max_side)]
    subprocess.run(cmd + [train], check=True)
    return out


def evaluate(model, loader):
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in loader:
            right += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return right / total


def train(model, batches, epochs, steps, lr):
    """SGD with momentum and a cosine schedule over epochs * steps steps; `batches(e)`
    yields epoch e's (images, labels)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=epochs * steps)
    wait = 0.0
    for e in range(epochs):
        t = time.perf_counter()
        for x, y in batches(e):
            wait += time.perf_counter() - t
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched.last_epoch + 1 < epochs * steps:
                sched.step()
            t = time.perf_counter()
    return wait


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("train")
    ap.add_argument("val")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=2, help="torchvision's DataLoader workers")
    ap.add_argument("--memory", default="25%", help="hdmlp budget (of the packed bytes)")
    ap.add_argument("--limit-train", type=int, default=0, metavar="N")
    ap.add_argument("--image-max-side", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="torch compute threads")
    ap.add_argument("--only", choices=["hdmlp", "torchvision"], default=None)
    ap.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                      "hdmlp-train-images"))
    ap.add_argument("--hdmlp-pack", default=None)
    ap.add_argument("--json", action="store_true", help="also print a JSON summary line")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    train_dir = args.train
    if args.limit_train:
        train_dir = subset_dir(args.train, os.path.join(args.workdir, f"sub{args.limit_train}"),
                               args.limit_train)
    packed = pack(args, train_dir)
    s = args.size
    tv_train = datasets.ImageFolder(train_dir, transforms.Compose([
        transforms.RandomResizedCrop(s), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
    val = DataLoader(datasets.ImageFolder(args.val, transforms.Compose([
        transforms.Resize(int(s / 0.875)), transforms.CenterCrop(s), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)])), batch_size=256, num_workers=args.workers)
    classes = tv_train.classes
    pipe = hdmlp.ImagePipeline(s, layout="NCHW", dtype="float32", normalize=True)
    steps = -(-len(tv_train) // args.batch_size)
    results = {}
    for seed in args.seeds:
        for name in ("hdmlp", "torchvision"):
            if args.only and name != args.only:
                continue
            torch.manual_seed(seed)
            model = Net(len(classes))
            t0 = time.perf_counter()
            if name == "hdmlp":
                ds = hdmlp.torch.HdmlpIterableDataset(packed, args.batch_size, args.memory,
                                                      seed=seed, image=pipe)
                assert ds.classes == classes, "TRAIN_DIR and the packed classes differ"
                dl = hdmlp.torch.DataLoader(ds, batch_size=None, num_workers=0)

                def batches(e, ds=ds, dl=dl):
                    ds.set_epoch(e)
                    return dl
            else:
                g = torch.Generator().manual_seed(seed)
                dl = DataLoader(tv_train, args.batch_size, shuffle=True, generator=g,
                                num_workers=args.workers, persistent_workers=args.workers > 0)

                def batches(e, dl=dl):
                    return dl
            wait = train(model, batches, args.epochs, steps, args.lr)
            wall = time.perf_counter() - t0
            acc = evaluate(model, val)
            results.setdefault(name, []).append({"seed": seed, "accuracy": acc,
                                                 "train_seconds": wall, "data_wait": wait})
            print(f"{name:<12} seed {seed}: val accuracy {acc:.4f}, {wall:.1f} s "
                  f"({wait:.1f} s waiting for data)", flush=True)
    summary = {}
    for name, runs in results.items():
        accs = [r["accuracy"] for r in runs]
        summary[name] = {"mean": statistics.mean(accs),
                         "stdev": statistics.stdev(accs) if len(accs) > 1 else 0.0,
                         "min": min(accs), "max": max(accs),
                         "train_seconds": statistics.mean(r["train_seconds"] for r in runs),
                         "runs": runs}
        print(f"{name:<12} accuracy {summary[name]['mean']:.4f} +- "
              f"{summary[name]['stdev']:.4f} (min {min(accs):.4f}, max {max(accs):.4f}) over "
              f"{len(accs)} seeds; {summary[name]['train_seconds']:.1f} s a run")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
