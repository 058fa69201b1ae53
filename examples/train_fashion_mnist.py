#!/usr/bin/python3
"""Train a small CNN on Fashion-MNIST twice — through hdmlp.torch and through torchvision's
standard ImageFolder pipeline, on the same PNG files — and print test accuracy and epoch
times side by side (the paper's claim: the loader reaches the same accuracy, §5.6).

    examples/train_fashion_mnist.py [--epochs 2] [--limit-train N] [--workers 2] ...

Needs Debian's dataset-fashion-mnist, python3-torch, python3-torchvision, python3-pil, the
hdmlp package on PYTHONPATH (<build>/python) and hdmlp-pack (--hdmlp-pack, $HDMLP_PACK or
PATH). The PNG tree (tests/data/make_fashion_mnist.py) and the packed dataset are cached in
--workdir. Both pipelines use the same model initialisation, optimiser, batch size, number
of DataLoader workers, decode and normalisation; only the input pipeline differs:
  hdmlp        HdmlpIterableDataset(train.hdmlp, memory=--memory) -> DataLoader(batch_size=None)
  torchvision  ImageFolder(train/) -> DataLoader(batch_size, shuffle=True)
Accuracy is measured on the test split through ImageFolder for both.
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

import hdmlp
import hdmlp.torch

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST train set


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def to_tensor(img):
    """PIL 'L' image -> normalised float tensor (1, 28, 28); the same for both pipelines."""
    t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
    t = t.view(1, img.height, img.width).float().div_(255.0)
    return t.sub_(MEAN).div_(STD)


def decode_png_bytes(sample):
    """hdmlp transform: the sample's bytes (a uint8 tensor viewing the batch) -> tensor."""
    return to_tensor(Image.open(io.BytesIO(sample.numpy())).convert("L"))


def load_png_file(path):
    """ImageFolder loader: the same decode, from a file."""
    with open(path, "rb") as f:
        return Image.open(io.BytesIO(f.read())).convert("L")


def prepare(args):
    """PNG tree + packed train set in args.workdir (reused when present)."""
    os.makedirs(args.workdir, exist_ok=True)
    tag = f"train{args.limit_train or 'all'}-test{args.limit_test or 'all'}"
    tree = os.path.join(args.workdir, f"png-{tag}")
    packed = os.path.join(args.workdir, f"train-{tag}.hdmlp")
    if not os.path.isfile(os.path.join(tree, "test.tsv")):
        shutil.rmtree(tree, ignore_errors=True)
        cmd = [sys.executable, os.path.join(HERE, "..", "tests", "data", "make_fashion_mnist.py"),
               tree, "--src", args.src]
        if args.limit_train:
            cmd += ["--limit-train", str(args.limit_train)]
        if args.limit_test:
            cmd += ["--limit-test", str(args.limit_test)]
        subprocess.run(cmd, check=True)
    if not os.path.isfile(os.path.join(packed, "index")):
        pack = args.hdmlp_pack or os.environ.get("HDMLP_PACK") or shutil.which("hdmlp-pack")
        if not pack:
            sys.exit("train_fashion_mnist: hdmlp-pack not found (--hdmlp-pack, $HDMLP_PACK)")
        subprocess.run([pack, "--quiet", "--force", "--seed", "1", "--chunk-size",
                        str(args.chunk_size), "-o", packed, os.path.join(tree, "train")],
                       check=True)
    return tree, packed


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def train(name, model, loader, epochs, lr, set_epoch=None):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    times = []
    for epoch in range(epochs):
        if set_epoch is not None:
            set_epoch(epoch)
        t0 = time.monotonic()
        n = 0
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            n += len(y)
        times.append(time.monotonic() - t0)
        print(f"  {name:<12} epoch {epoch + 1}: {n} samples in {times[-1]:.1f} s, "
              f"last loss {loss.item():.3f}", flush=True)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (both)")
    ap.add_argument("--memory", default="25%", help="hdmlp budget (default 25%% of the data)")
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--limit-train", type=int, default=None, metavar="N",
                    help="first N training images (default all 60000)")
    ap.add_argument("--limit-test", type=int, default=None, metavar="N")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch compute threads (default 1: the workers need the other core)")
    ap.add_argument("--only", choices=["hdmlp", "torchvision"], default=None)
    ap.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                      "hdmlp-fashion-mnist"))
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--hdmlp-pack", default=None)
    ap.add_argument("--json", action="store_true", help="also print a JSON summary line")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    t0 = time.monotonic()
    tree, packed = prepare(args)
    print(f"data ready in {time.monotonic() - t0:.1f} s: {tree}, {packed}", flush=True)

    test_set = datasets.ImageFolder(os.path.join(tree, "test"), loader=load_png_file,
                                    transform=to_tensor)
    test_loader = DataLoader(test_set, batch_size=512, num_workers=args.workers)
    dl_extra = dict(num_workers=args.workers, persistent_workers=args.workers > 0)
    results = {}

    if args.only in (None, "hdmlp"):
        torch.manual_seed(args.seed)
        model = Net()
        ds = hdmlp.torch.HdmlpIterableDataset(packed, args.batch_size, args.memory,
                                              seed=args.seed, transform=decode_png_bytes)
        assert ds.classes == test_set.classes, (ds.classes, test_set.classes)
        loader = DataLoader(ds, batch_size=None, **dl_extra)
        times = train("hdmlp", model, loader, args.epochs, args.lr, ds.set_epoch)
        results["hdmlp"] = {"epoch_s": times, "accuracy": evaluate(model, test_loader)}

    if args.only in (None, "torchvision"):
        torch.manual_seed(args.seed)
        model = Net()
        train_set = datasets.ImageFolder(os.path.join(tree, "train"), loader=load_png_file,
                                         transform=to_tensor)
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **dl_extra)
        times = train("torchvision", model, loader, args.epochs, args.lr)
        results["torchvision"] = {"epoch_s": times, "accuracy": evaluate(model, test_loader)}

    print(f"\n{'pipeline':<12} {'test acc':>8}  epoch times (s)")
    for name, r in results.items():
        epochs = " ".join(f"{t:6.1f}" for t in r["epoch_s"])
        print(f"{name:<12} {r['accuracy']:8.4f}  {epochs}")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
