#!/usr/bin/python3
"""Synthetic datasets for the loader benchmark.

    loader_gen.py tree OUT --count N --mean BYTES [--sigma S] [--classes C] [--seed S]
    loader_gen.py tar FILE --count N --size BYTES [--classes C] [--seed S]
    loader_gen.py subset OUT --from TREE --count N

`tree` writes an ImageFolder-style tree OUT/files/<class>/<i>.bin of N files whose sizes
follow a lognormal law with the given mean and sigma (sigma 0 = all equal), clipped to
[512 B, 16 x mean], plus OUT/list.tsv ("<class>/<i>.bin<TAB><class>", relative to
OUT/files; usable as `hdmlp-pack --list` input from OUT/files and by loader_perfile) and
OUT/sizes.json. ImageNet's JPEGs (mean ~110 KiB) fit sigma ~0.6. `tar` writes an
uncompressed tar of N members of exactly BYTES each (used for the 1 KiB warm-path dataset,
so that no million small files need to exist). Contents are pseudo-random (incompressible,
like JPEG); every output byte is determined by the seed. `subset` makes OUT a tree of hard
links to the first N files of TREE's list (same inodes: no extra disk space).
"""
import argparse
import io
import json
import math
import os
import random
import sys
import tarfile

POOL = 1 << 24  # 16 MiB of random bytes, sliced at random offsets


def pool(rng):
    return rng.randbytes(POOL + (1 << 22))


def sizes_lognormal(rng, n, mean, sigma):
    if sigma <= 0:
        return [int(mean)] * n
    mu = math.log(mean) - sigma * sigma / 2
    hi = int(16 * mean)
    return [max(512, min(hi, int(rng.lognormvariate(mu, sigma)))) for _ in range(n)]


def tree(o):
    rng = random.Random(o.seed)
    data = pool(rng)
    sizes = sizes_lognormal(rng, o.count, o.mean, o.sigma)
    files = os.path.join(o.out, "files")
    for c in range(o.classes):
        os.makedirs(os.path.join(files, f"c{c:03d}"), exist_ok=True)
    lines = []
    for i, size in enumerate(sizes):
        cls = f"c{i % o.classes:03d}"
        rel = f"{cls}/{i:07d}.bin"
        chunks = []
        left = size
        while left > 0:
            n = min(left, 1 << 22)
            off = rng.randrange(POOL)
            chunks.append(data[off:off + n])
            left -= n
        with open(os.path.join(files, rel), "wb") as f:
            f.write(i.to_bytes(8, "little"))  # no two files alike
            f.write(b"".join(chunks)[: size - 8])
        lines.append(f"{rel}\t{cls}\n")
    with open(os.path.join(o.out, "list.tsv"), "w") as f:
        f.writelines(lines)
    total = sum(sizes)
    with open(os.path.join(o.out, "sizes.json"), "w") as f:
        json.dump({"count": o.count, "bytes": total, "mean": total / o.count,
                   "min": min(sizes), "max": max(sizes), "sigma": o.sigma,
                   "seed": o.seed}, f)
        f.write("\n")


def subset(o):
    with open(os.path.join(o.src, "list.tsv")) as f:
        lines = f.readlines()[: o.count]
    src = os.path.join(o.src, "files")
    dst = os.path.join(o.out, "files")
    total = 0
    sizes = []
    for line in lines:
        rel = line.split("\t", 1)[0]
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        if not os.path.exists(os.path.join(dst, rel)):
            os.link(os.path.join(src, rel), os.path.join(dst, rel))
        sizes.append(os.path.getsize(os.path.join(dst, rel)))
    total = sum(sizes)
    with open(os.path.join(o.out, "list.tsv"), "w") as f:
        f.writelines(lines)
    with open(os.path.join(o.out, "sizes.json"), "w") as f:
        json.dump({"count": len(sizes), "bytes": total, "mean": total / len(sizes),
                   "min": min(sizes), "max": max(sizes), "subset_of": o.src}, f)
        f.write("\n")


def tar(o):
    rng = random.Random(o.seed)
    data = pool(rng)
    with tarfile.open(o.out, "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(o.count):
            info = tarfile.TarInfo(f"c{i % o.classes:03d}/{i:07d}.bin")
            info.size = o.size
            info.mtime = 1577836800
            off = rng.randrange(POOL)
            t.addfile(info, io.BytesIO(i.to_bytes(8, "little") + data[off:off + o.size - 8]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["tree", "tar", "subset"])
    p.add_argument("out")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--mean", type=float, default=110 * 1024)
    p.add_argument("--sigma", type=float, default=0.6)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--from", dest="src", help="subset: the source tree")
    o = p.parse_args()
    if o.count < 1 or o.classes < 1 or o.size < 8 or o.mean < 8:
        sys.exit("loader_gen: need --count >= 1, --classes >= 1 and sizes >= 8 bytes")
    if o.mode == "subset" and not o.src:
        sys.exit("loader_gen: subset needs --from TREE")
    {"tree": tree, "tar": tar, "subset": subset}[o.mode](o)


if __name__ == "__main__":
    main()
