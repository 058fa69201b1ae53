#!/usr/bin/python3
"""Image + text + boxes through hdmlp.torch: a small CLIP-style model on Fashion-MNIST.

    examples/train_image_text.py [--limit-train N] [--limit-test N] [--epochs 2]
                                 [--workers 2] [--json] [--workdir DIR]

Makes a dataset of samples with fields from Debian's dataset-fashion-mnist: each sample is
the image (a PNG file), a caption (text: a template and a few words about the class, drawn
from a seeded generator), the item's bounding box (an int16 ndarray [x0, y0, x1, y1] saved
as .npy), metadata (JSON) and the class (the label), written as a JSONL manifest and packed
with hdmlp.pack(manifests=...). The model learns from captions alone: an image encoder and
a bag-of-words text encoder are trained contrastively (matching image–caption pairs of a
batch), with a box regression head. It is then evaluated on the test split without labels:
zero-shot classification (each image against the captions "a photo of a CLASS"; chance
0.1) and the mean IoU of the predicted boxes.

Needs python3-torch, python3-pil, python3-numpy, dataset-fashion-mnist, the hdmlp package
on PYTHONPATH (<build>/python) and hdmlp-pack (--hdmlp-pack, $HDMLP_PACK or PATH). Prints
the results, with --json as one JSON line.
"""
import argparse
import io
import json
import os
import random
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

import hdmlp
import hdmlp.torch

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_TREE = os.path.join(HERE, "..", "tests", "data", "make_fashion_mnist.py")
WORDS = {"T-shirt_top": "t-shirt", "Trouser": "trousers", "Pullover": "pullover",
         "Dress": "dress", "Coat": "coat", "Sandal": "sandal", "Shirt": "shirt",
         "Sneaker": "sneaker", "Bag": "bag", "Ankle_boot": "ankle boot"}
TEMPLATES = ["a photo of a {}", "a picture of the {}", "{}, product image",
             "grayscale image of a {}", "a small {} on black", "this is a {}"]
EXTRA = ["", "", "plain", "simple", "centred", "low resolution"]
PROMPT = "a photo of a {}"


def caption(cls, rng):
    words = TEMPLATES[rng.randrange(len(TEMPLATES))].format(WORDS[cls])
    extra = EXTRA[rng.randrange(len(EXTRA))]
    return f"{words} {extra}".strip()


def vocabulary():
    text = " ".join(TEMPLATES + EXTRA + list(WORDS.values()))
    return {w: i + 1 for i, w in enumerate(sorted(set(tokens(text))))}  # 0: unknown


def tokens(text):
    return re.findall(r"[a-z0-9]+", text.lower().replace("{}", " "))


def make_manifest(tree, split, rng):
    """A JSONL manifest of tree/SPLIT.tsv's images: image, caption, box (.npy), meta, label."""
    path = os.path.join(tree, f"{split}.jsonl")
    if os.path.exists(path):
        return path
    os.makedirs(os.path.join(tree, "boxes", split), exist_ok=True)
    rows = []
    with open(os.path.join(tree, f"{split}.tsv")) as f:
        for line in f:
            rel, cls = line.rstrip("\n").split("\t")
            img = Image.open(os.path.join(tree, rel))
            x0, y0, x1, y1 = img.getbbox() or (0, 0, img.width, img.height)
            box = os.path.join("boxes", split, os.path.basename(rel) + ".npy")
            np.save(os.path.join(tree, box), np.array([x0, y0, x1, y1], dtype=np.int16))
            rows.append({"image": rel, "caption": caption(cls, rng), "box": box,
                         "meta": {"split": split, "file": os.path.basename(rel)},
                         "label": cls})
    with open(path + ".tmp", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    os.replace(path + ".tmp", path)
    return path


def token_ids(texts, vocab):
    """Token ids of texts, padded with 0 into one tensor."""
    ids = [[vocab.get(t, 0) for t in tokens(text)] for text in texts]
    width = max(len(x) for x in ids)
    return torch.tensor([x + [0] * (width - len(x)) for x in ids], dtype=torch.int64)


class Collate:
    """collate_fields hook (runs in the DataLoader workers): PNG bytes decoded into one
    float tensor, captions into a padded token-id tensor, boxes scaled to [0, 1]."""

    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, samples):
        images = np.stack([np.asarray(Image.open(io.BytesIO(s["image"]))) for s in samples])
        text = token_ids([str(s["caption"], "utf-8") for s in samples], self.vocab)
        boxes = torch.from_numpy(np.stack([s["box"] for s in samples]).astype(np.float32))
        return {"image": torch.from_numpy(images).float().div_(255).unsqueeze(1),
                "text": text, "box": boxes / 28.0,
                "label": torch.tensor([s["label"] for s in samples])}


class Model(nn.Module):
    def __init__(self, vocab_size, dim=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 7 * 7, 128)
        self.embed_image = nn.Linear(128, dim)
        self.box = nn.Linear(128, 4)
        self.embed_text = nn.EmbeddingBag(vocab_size + 1, dim, mode="mean", padding_idx=0)
        self.scale = nn.Parameter(torch.tensor(2.5))

    def image(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        h = F.relu(self.fc(x.flatten(1)))
        return F.normalize(self.embed_image(h), dim=1), torch.sigmoid(self.box(h))

    def text(self, ids):
        return F.normalize(self.embed_text(ids), dim=1)


def iou(a, b):
    lo, hi = torch.maximum(a[:, :2], b[:, :2]), torch.minimum(a[:, 2:], b[:, 2:])
    inter = (hi - lo).clamp(min=0).prod(1)
    area = lambda r: (r[:, 2:] - r[:, :2]).clamp(min=0).prod(1)  # noqa: E731
    return inter / (area(a) + area(b) - inter).clamp(min=1e-9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit-train", type=int, default=20000)
    ap.add_argument("--limit-test", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--memory", default="16M")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=os.path.join(os.getcwd(), "image_text_work"))
    ap.add_argument("--hdmlp-pack", default=os.environ.get("HDMLP_PACK"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.hdmlp_pack:
        os.environ["HDMLP_PACK"] = a.hdmlp_pack
    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    tree = os.path.join(a.workdir, f"tree-{a.limit_train}-{a.limit_test}")
    if not os.path.isdir(tree):
        subprocess.run([sys.executable, MAKE_TREE, tree + ".tmp", "--limit-train",
                        str(a.limit_train), "--limit-test", str(a.limit_test)], check=True,
                       stdout=subprocess.DEVNULL)
        os.replace(tree + ".tmp", tree)
    rng = random.Random(a.seed)
    packed = {}
    for split in ("train", "test"):
        packed[split] = os.path.join(tree, f"{split}.hdmlp")
        if not os.path.isdir(packed[split]):
            hdmlp.pack(None, packed[split], manifests=make_manifest(tree, split, rng),
                       file_fields=["image", "box"], require_fields="image,caption,box",
                       seed=a.seed, quiet=True)
    with hdmlp.Dataset(packed["train"]) as ds:
        fields = {f["name"]: f["type"] for f in ds.fields}
        classes = ds.classes
    vocab = vocabulary()
    collate = Collate(vocab)
    model = Model(len(vocab))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    train = hdmlp.torch.HdmlpIterableDataset(packed["train"], batch_size=a.batch_size,
                                             memory=a.memory, seed=a.seed, drop_last=True,
                                             collate_fields=collate)
    loader = hdmlp.torch.DataLoader(train, batch_size=None, num_workers=a.workers,
                                    persistent_workers=a.workers > 0)
    samples, start = 0, time.perf_counter()
    for epoch in range(a.epochs):
        train.set_epoch(epoch)
        model.train()
        for b in loader:
            img, box = model.image(b["image"])
            txt = model.text(b["text"])
            logits = model.scale.exp() * img @ txt.T
            # captions of one class say the same thing: every pair of that class matches
            same = (b["label"][:, None] == b["label"][None, :]).float()
            target = same / same.sum(1, keepdim=True)
            loss = (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
            loss = loss + 4 * F.smooth_l1_loss(box, b["box"], beta=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            samples += len(b["label"])
    seconds = time.perf_counter() - start
    # zero-shot: test images against one prompt a class (labels only to score)
    model.eval()
    prompts = token_ids([PROMPT.format(WORDS[c]) for c in classes], vocab)
    test = hdmlp.torch.HdmlpIterableDataset(packed["test"], batch_size=500, memory=a.memory,
                                            seed=0, collate_fields=collate)
    correct = total = 0
    ious = []
    with torch.no_grad():
        txt = model.text(prompts)
        for b in torch.utils.data.DataLoader(test, batch_size=None):
            img, box = model.image(b["image"])
            correct += int(((img @ txt.T).argmax(1) == b["label"]).sum())
            total += len(b["label"])
            ious.append(iou(box, b["box"]))
    result = {"zero_shot_accuracy": round(correct / total, 4),
              "box_iou": round(float(torch.cat(ious).mean()), 4),
              "train_samples_per_s": round(samples / seconds, 1),
              "epochs": a.epochs, "train_samples": samples // max(a.epochs, 1),
              "test_samples": total, "fields": fields}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"fields {fields}")
        print(f"zero-shot accuracy {result['zero_shot_accuracy']:.3f} (chance 0.1), "
              f"box IoU {result['box_iou']:.3f}, {result['train_samples_per_s']:.0f} "
              f"samples/s training ({a.workers} workers)")


if __name__ == "__main__":
    main()
