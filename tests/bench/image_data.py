#!/usr/bin/env python3
"""Makes the image benchmark's dataset from natural photographs that Debian packages ship.

Sources (installed by image_bench.sh with apt-get, not by CI): the twelve nature
photographs of `mate-backgrounds` (/usr/share/backgrounds/mate/nature/*.jpg, 1280-2560 px)
and the colour photographs of scikit-image's data (`python3-skimage`: astronaut, chelsea,
coffee, motorcycle_left, motorcycle_right, rocket, hubble_deep_field). Illustrations and
textures are left out. Each source photograph is one class.

Each sample is a distinct random crop of one source (source drawn in proportion to its
area; crop area 8-100 % of the source, aspect ratio 3/4..4/3, log-uniform), resized so
that its longer side is 400-500 px (uniform), flipped in half of the cases, and saved as
JPEG with 4:4:4 chroma at quality 100 (40 %) or 90-99: an ImageNet-like spread of sizes
(mean ~110 KiB, ~450 px; these photographs are smooth, so it takes high qualities).
With --small, the small set instead: the longer side 360-500 px and every JPEG at quality
90 with 4:2:0 chroma (PIL's default), ~20-40 KiB each: the size of web-scale training images.
Layout: OUT/train/CLASS/NNNNNN.jpg and OUT/val/CLASS/NNNNNN.jpg, the ImageFolder layout.
Deterministic for --seed. Prints the size statistics at the end.

    python3 tests/bench/image_data.py OUT [--train 20000] [--val 2000] [--seed 1] [-j 2]
                                          [--small]
"""
import argparse
import glob
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image

# Share of JPEGs saved at quality 100, the rest at 90-99: these photographs are smooth
# (shallow depth of field), so high qualities give ImageNet's ~110 KiB at ~450 px.
QUALITY_100 = 0.4
SKIMAGE = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
           "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg"]


def sources():
    found = sorted(glob.glob("/usr/share/backgrounds/mate/nature/*.jpg"))
    sk = "/usr/lib/python3/dist-packages/skimage/data"
    found += [os.path.join(sk, f) for f in SKIMAGE if os.path.exists(os.path.join(sk, f))]
    return found


_SRC = None


def _init(paths):
    global _SRC
    _SRC = [Image.open(p).convert("RGB") for p in paths]
    for im in _SRC:
        im.load()


def _make(job):
    """job = (path, class index, seed, small); returns the file's size and dimensions."""
    path, cls, seed, small = job
    rng = np.random.default_rng(seed)
    src = _SRC[cls]
    sw, sh = src.size
    for _ in range(20):
        area = sw * sh * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w = int(round(np.sqrt(area * ratio)))
        h = int(round(np.sqrt(area / ratio)))
        if 0 < w <= sw and 0 < h <= sh:
            break
    else:
        w, h = min(sw, sh), min(sw, sh)
    x = int(rng.integers(0, sw - w + 1))
    y = int(rng.integers(0, sh - h + 1))
    longer = int(rng.integers(360, 501) if small else rng.integers(400, 501))
    f = longer / max(w, h)
    size = (max(1, int(round(w * f))), max(1, int(round(h * f))))
    im = src.crop((x, y, x + w, y + h)).resize(size, Image.BICUBIC)
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    if small:
        im.save(path, quality=90)  # 4:2:0
        return os.path.getsize(path), size
    q = 100 if rng.random() < QUALITY_100 else int(rng.integers(90, 100))
    im.save(path, quality=q, subsampling=0)  # 4:4:4
    return os.path.getsize(path), size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--val", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--small", action="store_true", help="quality 90, 4:2:0, 360-500 px")
    a = ap.parse_args()
    paths = sources()
    if len(paths) < 2:
        sys.exit("image_data.py: no source photographs found; install mate-backgrounds "
                 "and python3-skimage (image_bench.sh does)")
    areas = []
    for p in paths:
        with Image.open(p) as im:
            areas.append(im.size[0] * im.size[1])
    prob = np.array(areas, float) / sum(areas)
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    rng = np.random.default_rng(a.seed)
    jobs = []
    for split, n in (("train", a.train), ("val", a.val)):
        for n_cls in names:
            os.makedirs(os.path.join(a.out, split, n_cls), exist_ok=True)
        cls = rng.choice(len(paths), size=n, p=prob)
        seeds = rng.integers(0, 2**63, size=n)
        for i in range(n):
            path = os.path.join(a.out, split, names[cls[i]], "%06d.jpg" % i)
            jobs.append((path, int(cls[i]), int(seeds[i]), a.small))
    with Pool(a.jobs, initializer=_init, initargs=(paths,)) as pool:
        res = pool.map(_make, jobs, chunksize=64)
    sizes = np.array([r[0] for r in res], float)
    longer = np.array([max(r[1]) for r in res], float)
    shorter = np.array([min(r[1]) for r in res], float)
    print("image_data: %d train + %d val JPEGs from %d photographs in %s" %
          (a.train, a.val, len(paths), a.out))
    print("  bytes: mean %.1f KiB, p10 %.1f, p50 %.1f, p90 %.1f KiB; total %.1f MiB" %
          (sizes.mean() / 1024, np.percentile(sizes, 10) / 1024,
           np.percentile(sizes, 50) / 1024, np.percentile(sizes, 90) / 1024,
           sizes.sum() / 2**20))
    print("  sides: longer mean %.0f px, shorter mean %.0f px (p10 %.0f, p90 %.0f)" %
          (longer.mean(), shorter.mean(), np.percentile(shorter, 10),
           np.percentile(shorter, 90)))


if __name__ == "__main__":
    main()
