#!/usr/bin/python3
"""Build an ImageFolder-style tree from Debian's Fashion-MNIST (package dataset-fashion-mnist).

    make_fashion_mnist.py OUT [--limit-train N] [--limit-test N] [--format png|pgm]
                              [--tar-gz FILE] [--src DIR]

writes
    OUT/train/<class name>/<index>.<ext>     index = position in the IDX file, 5 digits
    OUT/test/<class name>/<index>.<ext>
    OUT/train.tsv, OUT/test.tsv              manifests: "<relative path>\t<class name>" per
                                             line, paths relative to OUT (usable as
                                             `hdmlp-pack --list` input from OUT)
and, with --tar-gz FILE, a tar.gz of the train tree whose members are
"<class name>/<index>.<ext>" (regular files only, no directory members).

The subset is deterministic (the first N images of each split) and so is every output
byte: fixed PNG encoder settings, fixed mtimes/owners in the tar, gzip mtime 0.
Uses only gzip + PIL (PIL only for --format png); numpy is not needed.
"""
import argparse
import gzip
import io
import os
import struct
import sys
import tarfile
import time

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
SPLITS = {"train": "train", "test": "t10k"}
FIXED_MTIME = 1577836800  # 2020-01-01T00:00:00Z, for reproducible trees and archives


def read_idx(path, want_magic, limit):
    """Return (count, item_size, bytes) for the first `limit` items of an IDX gz file."""
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic != want_magic:
            sys.exit(f"make_fashion_mnist: {path}: bad IDX magic {magic:#x}")
        dims = []
        for _ in range((magic & 0xFF) - 1):
            dims.append(struct.unpack(">I", f.read(4))[0])
        item = 1
        for d in dims:
            item *= d
        count = n if limit is None else min(n, limit)
        data = f.read(count * item)
        if len(data) != count * item:
            sys.exit(f"make_fashion_mnist: {path}: truncated")
        return count, dims, data


def encode(pixels, rows, cols, fmt):
    if fmt == "pgm":
        return b"P5\n%d %d\n255\n" % (cols, rows) + pixels
    from PIL import Image  # python3-pil
    buf = io.BytesIO()
    Image.frombytes("L", (cols, rows), pixels).save(buf, format="PNG", optimize=False,
                                                    compress_level=6)
    return buf.getvalue()


def build_split(src, out, split, limit, fmt):
    prefix = SPLITS[split]
    n, dims, images = read_idx(os.path.join(src, f"{prefix}-images-idx3-ubyte.gz"), 0x803, limit)
    _, _, labels = read_idx(os.path.join(src, f"{prefix}-labels-idx1-ubyte.gz"), 0x801, limit)
    rows, cols = dims
    item = rows * cols
    root = os.path.join(out, split)
    for c in CLASSES:
        os.makedirs(os.path.join(root, c), exist_ok=True)
    members = []  # (relative member name, bytes) in index order
    manifest = []
    for i in range(n):
        cls = CLASSES[labels[i]]
        name = f"{cls}/{i:05d}.{fmt}"
        data = encode(images[i * item:(i + 1) * item], rows, cols, fmt)
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
        members.append((name, data))
        manifest.append(f"{split}/{name}\t{cls}\n")
    with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as f:
        f.writelines(manifest)
    return members


def write_tar_gz(path, members):
    tmp = path + ".tmp"
    with open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in sorted(members):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = FIXED_MTIME
            ti.mode = 0o644
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            tar.addfile(ti, io.BytesIO(data))
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--limit-train", type=int, default=None, metavar="N")
    ap.add_argument("--limit-test", type=int, default=None, metavar="N")
    ap.add_argument("--format", choices=["png", "pgm"], default="png")
    ap.add_argument("--tar-gz", metavar="FILE", help="also write a tar.gz of the train tree")
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist",
                    help="directory holding the *-idx?-ubyte.gz files")
    args = ap.parse_args()
    for lim in (args.limit_train, args.limit_test):
        if lim is not None and lim < 0:
            ap.error("limits must be >= 0")
    if not os.path.isfile(os.path.join(args.src, "train-images-idx3-ubyte.gz")):
        sys.exit(f"make_fashion_mnist: {args.src}: Fashion-MNIST not found "
                 "(apt-get install dataset-fashion-mnist)")
    t0 = time.monotonic()
    train = build_split(args.src, args.out, "train", args.limit_train, args.format)
    test = build_split(args.src, args.out, "test", args.limit_test, args.format)
    if args.tar_gz:
        write_tar_gz(args.tar_gz, train)
    print(f"make_fashion_mnist: {len(train)} train + {len(test)} test images "
          f"({args.format}) in {time.monotonic() - t0:.2f} s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
