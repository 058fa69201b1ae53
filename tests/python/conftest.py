"""Shared fixtures: small packed datasets made with hdmlp-pack from generated files.

Environment (set by ctest, see python/CMakeLists.txt):
  PYTHONPATH          the build tree's python/ (hdmlp package + extension)
  HDMLP_PACK          hdmlp-pack binary          HDMLP_BENCH   hdmlp-bench binary
  HDMLP_TEST_SLOWIO   LD_PRELOAD shim (slowio.c) HDMLP_TEST_TMP scratch directory
  HDMLP_SOURCE_DIR    source tree (header, examples)
  HDMLP_TEST_SHORT=1  smaller data where a test's time grows with it (tests/run.sh sets it
                      for the ASan pass)
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

SOURCE_DIR = os.environ.get("HDMLP_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__)))))
SEED = 20240611  # fixed and printed: every generated file derives from it
SHORT = os.environ.get("HDMLP_TEST_SHORT") == "1"


def tool(name):
    path = os.environ.get("HDMLP_" + name.upper().replace("HDMLP-", ""))
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"{name} not built (set HDMLP_{name.upper().replace('HDMLP-', '')})")
    return path


def pack(src, out, *args):
    """Runs hdmlp-pack; returns out."""
    cmd = [tool("hdmlp-pack"), "--quiet", "--force", "-o", out, *args, src]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {res.returncode}: {res.stderr}")
    return out


def write_tree(root, n, sizes, classes=("ant", "bee", "cat", "dog"), seed=SEED):
    """n files under root/<class>/; file i has size sizes(rng, i) and pseudo-random bytes.
    Returns {key: bytes} with key as hdmlp-pack stores it ("<class>/<name>")."""
    rng = random.Random(seed)
    files = {}
    for c in classes:
        os.makedirs(os.path.join(root, c), exist_ok=True)
    for i in range(n):
        c = classes[i % len(classes)]
        size = sizes(rng, i)
        # half compressible text, half random, so zstd 'auto' picks both codecs
        if i % 2:
            data = rng.randbytes(size)
        else:
            data = (b"sample %06d " % i * (size // 14 + 1))[:size]
        key = f"{c}/{i:05d}.bin"
        with open(os.path.join(root, key), "wb") as f:
            f.write(data)
        files[key] = data
    return files


class Packed:
    def __init__(self, path, files, chunk_size):
        self.path = path
        self.files = files
        self.n = len(files)
        self.chunk_size = chunk_size
        self.raw_bytes = sum(len(v) for v in files.values())


@pytest.fixture(scope="session")
def tmp_root():
    base = os.environ.get("HDMLP_TEST_TMP") or None
    if base:
        os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="hdmlp-py-", dir=base)
    print(f"hdmlp python tests: seed {SEED}, data in {d}")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def small_ds(tmp_root):
    """2000 samples of 0..3000 bytes (some empty), 4 classes, 16 per chunk, zstd auto."""
    src = os.path.join(tmp_root, "small-src")
    files = write_tree(src, 2000, lambda r, i: 0 if i % 37 == 5 else r.randint(1, 3000))
    out = pack(src, os.path.join(tmp_root, "small.hdmlp"), "--chunk-size", "16",
               "--seed", "11", "--segment-size", "64K")
    return Packed(out, files, 16)


@pytest.fixture(scope="session")
def worker_ds(tmp_root, small_ds):
    """For tests whose batches cross processes (DataLoader workers), which costs per batch:
    small_ds, or with HDMLP_TEST_SHORT=1 the same kind of data with 1200 samples."""
    if not SHORT:
        return small_ds
    src = os.path.join(tmp_root, "worker-src")
    files = write_tree(src, 1200, lambda r, i: 0 if i % 37 == 5 else r.randint(1, 3000))
    out = pack(src, os.path.join(tmp_root, "worker.hdmlp"), "--chunk-size", "16",
               "--seed", "11", "--segment-size", "64K")
    return Packed(out, files, 16)


@pytest.fixture(scope="session")
def fixed_ds(tmp_root):
    """400 samples of exactly 784 bytes, 10 classes, 8 per chunk (collation)."""
    src = os.path.join(tmp_root, "fixed-src")
    files = write_tree(src, 400, lambda r, i: 784, classes=tuple(f"c{k}" for k in range(10)))
    out = pack(src, os.path.join(tmp_root, "fixed.hdmlp"), "--chunk-size", "8", "--seed", "3")
    return Packed(out, files, 8)


def stats_fields():
    """Field names of struct hdmlp_stats, read from the public header."""
    with open(os.path.join(SOURCE_DIR, "include", "hdmlp.h")) as f:
        text = f.read()
    body = re.search(r"typedef struct hdmlp_stats \{(.*?)\} hdmlp_stats;", text, re.S).group(1)
    return re.findall(r"uint64_t (\w+)(?:\[\d+\])?;", body)


def epoch_sequences(loader, epochs):
    """[[indices of epoch 0 in delivery order], ...] through `for batch in loader`."""
    out = []
    for _ in range(epochs):
        seq = []
        for batch in loader:
            seq.extend(batch.indices)
        out.append(seq)
    return out


def run_python(code, env_extra=None, timeout=60):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout)


def ranks_epoch_sequences(make_loader, world, epochs=2, timeout=120):
    """Runs `world` ranks in threads over loopback peers; make_loader(rank, world, peers)
    returns a loader (a context manager). Returns {rank: epoch_sequences(loader, epochs)};
    a rank's exception is raised here."""
    import threading
    from test_resume import free_port
    peers = [f"127.0.0.1:{free_port()}" for _ in range(world)]
    out, errors = {}, []

    def rank(r):
        try:
            with make_loader(r, world, peers) as ld:
                out[r] = epoch_sequences(ld, epochs)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not errors, errors
    return out


def resume_at(make_loader, samples, epochs=2):
    """Takes `samples` deliveries (whole batches) from make_loader(), saves its state through
    pickle, and finishes `epochs` epochs in make_loader(state=...). Returns (the
    deliveries before + after the cut, the state)."""
    import pickle
    ld = make_loader()
    got = []
    while len(got) < samples and (b := ld.next_batch()) is not None:
        got.extend(b.indices)
    sd = pickle.loads(pickle.dumps(ld.state_dict()))
    ld.close()
    again = make_loader(state=sd)
    while again.epoch < epochs:
        for b in again:
            got.extend(b.indices)
    return got, sd
