#!/usr/bin/python3
"""The shard-streaming recipe (WebDataset's) as its users run it, for side-by-side runs.

    shard_recipe.py write SRC OUT [--seed 7] [--shard-bytes B]
    shard_recipe.py read OUT --memory 25% [--workers 2] [--batch 32] [--epochs 1]
                    [--start-epoch 0] [--seed 1] [--initial 100] [--log FILE]
                    [--impl auto|tarfile|webdataset] [--order-only]

write: the files of SRC (a folder of class folders, the raw files hdmlp-pack packs; classes
  and files sorted as torchvision's ImageFolder does, label = class index) go into tar
  shards OUT/shard-NNNNNN.tar in a seeded shuffled order (random.Random(seed).shuffle), each
  sample as two members KEY.bin (the file's bytes) and KEY.cls (the label, ASCII), KEY =
  s<source index>. A new shard starts when the next sample would take the shard past
  min(64 MiB, 1/16 of the data's bytes) (and at least 8 shards: equal counts otherwise).
  OUT/recipe.json records, in storage order (position = index in the concatenated shard
  order, the definition order_figures.py uses), every sample's key, label, size and source
  index, and each shard's first position and count.
read: torch.utils.data.IterableDataset over the shards, iterated by torch's DataLoader
  (batch_size=--batch, num_workers=--workers, non-persistent workers, in order). Per
  epoch, WebDataset 1.0.2's order of operations: the shard list split across workers
  (shards[w::W], split_by_worker), each worker's shards shuffled with a seeded RNG for
  (seed, epoch, worker) (detshuffle), the tars read sequentially (tarfile, mode 'r|': one
  pass, buffered reads), then a per-worker shuffle buffer with WebDataset's algorithm
  (fill two samples per output until `bufsize`, start yielding once `initial` are held,
  output a uniformly picked sample; seeded per (seed, epoch, worker)). bufsize =
  memory / workers / mean sample size: the buffers of all workers together hold --memory
  (bytes, K/M/G suffixes, or P% of the data). Each sample is (its bytes as a uint8
  tensor, label, storage position); a batch crosses to the main process packed (one flat
  uint8 tensor + sizes, labels, positions). The main process logs the delivered storage
  positions, one line per epoch, to --log (order_figures.py reads it) and prints one JSON
  line: epoch seconds (from creating the epoch's iterator, worker start-up included, to its
  last batch), samples/s, bytes, the buffer size, the shards, which implementation ran.
  --impl webdataset (the default when `import webdataset` works) builds the same pipeline
  with the webdataset package (1.0.2: WebDataset(shardshuffle, detshuffle, seed)
  .shuffle(bufsize, initial, seed), made anew per epoch); its order then follows
  webdataset's own seeding and only the tarfile implementation's order equals
  --order-only's.
  --order-only: no data read; the delivered order of the same seeds and buffer logic,
  computed from recipe.json's sizes (recipe_order()), written to --log, and the JSON line.

Python: recipe_order(sizes, memory=..., ...) gives the delivered storage positions of each
epoch from the sizes in storage order; write_permutation(n, seed) maps storage position ->
source index; source_order(...) composes both (the fidelity benchmark's input).
"""
import argparse
import json
import os
import random
import sys
import tarfile
import time

RECIPE_JSON = "recipe.json"
MAX_SHARD = 64 << 20
MIN_SHARDS = 8


# ---- the order: no I/O ---------------------------------------------------------------------
def write_permutation(n, seed):
    """perm[p] = source index of the sample written at storage position p."""
    perm = list(range(n))
    random.Random(seed).shuffle(perm)
    return perm


def default_shard_bytes(total):
    return max(1, min(MAX_SHARD, total // 16))


def shard_bounds(sizes, shard_bytes=None):
    """[(first position, count)] of the shards of samples of `sizes` (storage order)."""
    n = len(sizes)
    total = int(sum(int(s) for s in sizes))
    limit = shard_bytes or default_shard_bytes(total)
    bounds = []
    first = cur = 0
    for p, s in enumerate(sizes):
        if p > first and cur + int(s) > limit:
            bounds.append((first, p - first))
            first, cur = p, 0
        cur += int(s)
    if n > first:
        bounds.append((first, n - first))
    if len(bounds) < MIN_SHARDS and n >= MIN_SHARDS:
        cuts = [n * i // MIN_SHARDS for i in range(MIN_SHARDS + 1)]
        bounds = [(cuts[i], cuts[i + 1] - cuts[i]) for i in range(MIN_SHARDS)]
    return bounds


def buffer_size(memory, workers, mean_size):
    return max(1, int(memory / max(1, workers) / max(1.0, mean_size)))


def worker_shards(nshards, worker, workers, seed, epoch):
    """This worker's shards in this epoch's order (split by worker, then shuffled)."""
    mine = list(range(nshards))[worker::max(1, workers)]
    random.Random(f"shards/{seed}/{epoch}/{worker}").shuffle(mine)
    return mine


def buffer_rng(seed, epoch, worker):
    return random.Random(f"buffer/{seed}/{epoch}/{worker}")


def shuffle_buffer(stream, bufsize, initial, rng):
    """WebDataset's shuffle buffer: while filling, take two samples per output; output
    a uniformly picked sample (swapped with the last and popped) once `initial` are held."""
    initial = min(initial, bufsize)
    buf = []
    it = iter(stream)
    for x in it:
        buf.append(x)
        if len(buf) < bufsize:
            nxt = next(it, _END)
            if nxt is not _END:
                buf.append(nxt)
        if len(buf) >= initial:
            yield _pick(buf, rng)
    while buf:
        yield _pick(buf, rng)


_END = object()


def _pick(buf, rng):
    k = rng.randint(0, len(buf) - 1)
    x = buf[k]
    buf[k] = buf[-1]
    buf.pop()
    return x


def interleave(worker_batches):
    """The DataLoader's in-order delivery of an IterableDataset: batch i from the next
    worker in turn, workers that have ended skipped."""
    its = [iter(b) for b in worker_batches]
    live = list(range(len(its)))
    while live:
        for w in list(live):
            b = next(its[w], None)
            if b is None:
                live.remove(w)
            else:
                yield b


def batches_of(stream, batch):
    cur = []
    for x in stream:
        cur.append(x)
        if len(cur) == batch:
            yield cur
            cur = []
    if cur:
        yield cur


def recipe_order(sizes, memory, workers=2, batch=32, seed=1, epochs=1, start_epoch=0,
                 initial=100, shard_bytes=None, bounds=None):
    """The storage positions delivered in each epoch (a list of lists), from the sample
    sizes in storage order: the order `read` delivers, without reading anything."""
    if bounds is None:
        bounds = shard_bounds(sizes, shard_bytes)
    mean = sum(int(s) for s in sizes) / max(1, len(sizes))
    bufsize = buffer_size(memory, workers, mean)
    out = []
    for e in range(start_epoch, start_epoch + epochs):
        per_worker = []
        for w in range(max(1, workers)):
            stream = (p for s in worker_shards(len(bounds), w, workers, seed, e)
                      for p in range(bounds[s][0], bounds[s][0] + bounds[s][1]))
            per_worker.append(batches_of(
                shuffle_buffer(stream, bufsize, initial, buffer_rng(seed, e, w)), batch))
        out.append([p for b in interleave(per_worker) for p in b])
    return out


def source_order(source_sizes, write_seed, **kw):
    """recipe_order in source indices: the data written with write_permutation(write_seed)."""
    perm = write_permutation(len(source_sizes), write_seed)
    stored = [source_sizes[i] for i in perm]
    return [[perm[p] for p in e] for e in recipe_order(stored, **kw)]


# ---- write ---------------------------------------------------------------------------------
def image_folder(src):
    """[(path, label)] and the class names, sorted as torchvision's ImageFolder."""
    classes = sorted(d.name for d in os.scandir(src) if d.is_dir())
    items = []
    for label, c in enumerate(classes):
        for root, _, files in sorted(os.walk(os.path.join(src, c))):
            for f in sorted(files):
                items.append((os.path.join(root, f), label))
    return items, classes


def _member(tar, name, data):
    import io
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1577836800
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write(o):
    items, classes = image_folder(o.src)
    if not items:
        sys.exit(f"shard_recipe: no files under {o.src}")
    perm = write_permutation(len(items), o.seed)
    sizes = [os.path.getsize(items[i][0]) for i in perm]
    bounds = shard_bounds(sizes, o.shard_bytes)
    os.makedirs(o.out, exist_ok=True)
    t0 = time.monotonic()
    shards = []
    for s, (first, count) in enumerate(bounds):
        name = f"shard-{s:06d}.tar"
        path = os.path.join(o.out, name)
        with open(path, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for p in range(first, first + count):
                    src, label = items[perm[p]]
                    with open(src, "rb") as f:
                        data = f.read()
                    key = f"s{perm[p]:07d}"
                    _member(tar, key + ".bin", data)
                    _member(tar, key + ".cls", str(label).encode())
            raw.flush()
            os.fsync(raw.fileno())
        shards.append({"name": name, "first": first, "count": count,
                       "bytes": os.path.getsize(path)})
    meta = {"format": "shard_recipe/1", "seed": o.seed, "src": os.path.abspath(o.src),
            "classes": classes, "shard_bytes": o.shard_bytes or default_shard_bytes(sum(sizes)),
            "samples": len(items), "bytes": sum(sizes), "shards": shards,
            "keys": [f"s{i:07d}" for i in perm], "labels": [items[i][1] for i in perm],
            "sizes": sizes, "source_index": perm}
    with open(os.path.join(o.out, RECIPE_JSON), "w") as f:
        json.dump(meta, f)
    print(json.dumps({"samples": len(items), "bytes": sum(sizes), "shards": len(shards),
                      "shard_bytes": meta["shard_bytes"], "seconds": time.monotonic() - t0}))


# ---- read ----------------------------------------------------------------------------------
def parse_memory(text, total):
    t = str(text).strip()
    if t.endswith("%"):
        return int(total * float(t[:-1]) / 100)
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if t and t[-1].upper() in mult:
        return int(float(t[:-1]) * mult[t[-1].upper()])
    return int(t)


def tar_samples(path, key_pos):
    """(bytes, label, storage position) of each sample of one tar shard, one pass."""
    cur_key, data, label = None, None, None
    with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tar:
        for info in tar:
            if not info.isfile():
                continue
            key, _, ext = info.name.partition(".")
            if key != cur_key:
                if cur_key is not None:
                    yield data, label, key_pos[cur_key]
                cur_key, data, label = key, None, -1
            payload = tar.extractfile(info).read()
            if ext == "bin":
                data = payload
            elif ext == "cls":
                label = int(payload)
    if cur_key is not None:
        yield data, label, key_pos[cur_key]


def make_dataset(meta, root, bufsize, initial, seed, epoch):
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    class ShardStream(IterableDataset):
        def __init__(self):
            super().__init__()
            self.epoch = 0
            self.paths = [os.path.join(root, s["name"]) for s in meta["shards"]]
            self.key_pos = {k: p for p, k in enumerate(meta["keys"])}

        def set_epoch(self, e):
            self.epoch = e

        def __iter__(self):
            info = get_worker_info()
            w, nw = (0, 1) if info is None else (info.id, info.num_workers)
            order = worker_shards(len(self.paths), w, nw, seed, self.epoch)
            stream = (x for s in order for x in tar_samples(self.paths[s], self.key_pos))
            for data, label, pos in shuffle_buffer(stream, bufsize, initial,
                                                   buffer_rng(seed, self.epoch, w)):
                yield torch.frombuffer(bytearray(data), dtype=torch.uint8), label, pos

    ds = ShardStream()
    ds.set_epoch(epoch)
    return ds


class _ToItem:
    """webdataset sample dict -> (uint8 tensor, label, storage position); picklable."""

    def __init__(self, key_pos):
        self.key_pos = key_pos

    def __call__(self, sample):
        import torch
        return (torch.frombuffer(bytearray(sample["bin"]), dtype=torch.uint8),
                int(sample["cls"]), self.key_pos[sample["__key__"]])


def make_webdataset(meta, root, bufsize, initial, seed, epoch):
    """The same recipe with the webdataset package (1.0.2's API): WebDataset(urls,
    shardshuffle=<all shards>, detshuffle=True, seed) .shuffle(bufsize, initial, seed).
    Made anew each epoch with seed + epoch: non-persistent workers get a fresh copy, so
    webdataset's own epoch counter would repeat epoch 0's order. Its shuffles are seeded
    by webdataset, not as --order-only computes them."""
    import webdataset as wds
    urls = [os.path.join(root, s["name"]) for s in meta["shards"]]
    key_pos = {k: p for p, k in enumerate(meta["keys"])}
    s = seed * 1_000_003 + epoch
    ds = wds.WebDataset(urls, shardshuffle=len(urls), detshuffle=True, seed=s)
    return ds.shuffle(bufsize, initial=initial, seed=s).map(_ToItem(key_pos))


def collate(items):
    """A batch crossing the worker queue as one flat tensor: (flat, sizes, labels, pos)."""
    import torch
    sizes = torch.tensor([t.numel() for t, _, _ in items], dtype=torch.int64)
    flat = torch.cat([t for t, _, _ in items]) if items else torch.empty(0, dtype=torch.uint8)
    labels = torch.tensor([lab for _, lab, _ in items], dtype=torch.int64)
    pos = torch.tensor([p for _, _, p in items], dtype=torch.int64)
    return flat, sizes, labels, pos


def pick_impl(want):
    if want == "tarfile":
        return "tarfile"
    try:
        import webdataset  # noqa: F401
        return "webdataset"
    except ImportError:
        if want == "webdataset":
            sys.exit("shard_recipe: --impl webdataset: the webdataset package is not importable")
        return "tarfile"


def write_log(path, epochs):
    if path:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from order_figures import write_ids
        write_ids(path, epochs)


def read(o):
    with open(os.path.join(o.dir, RECIPE_JSON)) as f:
        meta = json.load(f)
    total = meta["bytes"]
    memory = parse_memory(o.memory, total)
    mean = total / max(1, meta["samples"])
    bufsize = buffer_size(memory, o.workers, mean)
    bounds = [(s["first"], s["count"]) for s in meta["shards"]]
    out = {"recipe": None, "samples": 0, "bytes": 0, "workers": o.workers, "batch": o.batch,
           "memory_bytes": memory, "bufsize": bufsize, "initial": min(o.initial, bufsize),
           "buffer_bytes_est": int(bufsize * mean * max(1, o.workers)),
           "shards": len(bounds), "shard_bytes": meta["shard_bytes"], "seed": o.seed,
           "epochs": o.epochs, "start_epoch": o.start_epoch, "data_bytes": total,
           "data_samples": meta["samples"]}
    if o.order_only:
        t0 = time.monotonic()
        order = recipe_order(meta["sizes"], memory, workers=o.workers, batch=o.batch,
                             seed=o.seed, epochs=o.epochs, start_epoch=o.start_epoch,
                             initial=o.initial, bounds=bounds)
        write_log(o.log, order)
        out.update(recipe="order-only", samples=sum(len(e) for e in order),
                   seconds=time.monotonic() - t0, order_log=o.log)
        print(json.dumps(out), flush=True)
        return
    import torch
    from torch.utils.data import DataLoader
    torch.set_num_threads(1)
    impl = pick_impl(o.impl)
    maker = make_webdataset if impl == "webdataset" else make_dataset
    epochs_pos = []
    epoch_seconds = []
    nbytes = 0
    t_all = time.monotonic()
    for e in range(o.start_epoch, o.start_epoch + o.epochs):
        ds = maker(meta, o.dir, bufsize, o.initial, o.seed, e)
        dl = DataLoader(ds, batch_size=o.batch, num_workers=o.workers, collate_fn=collate,
                        persistent_workers=False)
        pos = []
        t0 = time.monotonic()
        for flat, sizes, labels, p in dl:
            nbytes += flat.numel()
            pos.extend(p.tolist())
        epoch_seconds.append(time.monotonic() - t0)
        epochs_pos.append(pos)
        del dl, ds
    seconds = time.monotonic() - t_all
    write_log(o.log, epochs_pos)
    samples = sum(len(e) for e in epochs_pos)
    out.update(recipe=impl, samples=samples, bytes=nbytes, seconds=seconds,
               epoch_seconds=epoch_seconds,
               samples_per_s=samples / seconds if seconds > 0 else None,
               first_epoch_samples_per_s=(len(epochs_pos[0]) / epoch_seconds[0]
                                          if epoch_seconds and epoch_seconds[0] > 0 else None),
               mb_per_s=nbytes / 1e6 / seconds if seconds > 0 else None,
               order_log=o.log, torch=torch.__version__)
    print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("write", help="tar shards from a folder of class folders")
    w.add_argument("src")
    w.add_argument("out")
    w.add_argument("--seed", type=int, default=7)
    w.add_argument("--shard-bytes", type=int, default=None)
    r = sub.add_parser("read", help="iterate the shards (or --order-only)")
    r.add_argument("dir")
    r.add_argument("--memory", required=True)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--epochs", type=int, default=1)
    r.add_argument("--start-epoch", type=int, default=0)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--initial", type=int, default=100)
    r.add_argument("--log", default=None)
    r.add_argument("--impl", choices=["auto", "tarfile", "webdataset"], default="auto")
    r.add_argument("--order-only", action="store_true")
    o = p.parse_args()
    if o.mode == "write":
        write(o)
    else:
        if o.workers < 0 or o.batch < 1 or o.epochs < 1:
            p.error("need --workers >= 0, --batch >= 1, --epochs >= 1")
        read(o)


if __name__ == "__main__":
    main()
