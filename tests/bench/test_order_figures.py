"""Checks of order_figures.py (and of shard_recipe.py's generated order).

    /usr/bin/python3 -m pytest tests/bench/test_order_figures.py

The cross-check against hdmlp-bench's own figures runs when a built hdmlp-bench and
hdmlp-pack are found (HDMLP_BUILD, default build/ of the source tree); else it is skipped.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import order_figures as of  # noqa: E402

N, K = 8000, 64


def perms(epochs, seed=1, n=N):
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(epochs)]


def test_permutation_is_random():
    f = of.figures(perms(4), k=K, n=N)
    assert abs(f["same_chunk_distance"] - 1) < 0.03
    assert abs(f["spearman_storage"]) < 0.03
    assert abs(f["epoch_position_correlation"]) < 0.03
    # about (2K - 1) / N = 1.6 %
    assert 0.5 * (2 * K - 1) / N < f["neighbour_fraction"] < 2 * (2 * K - 1) / N
    assert f["epochs"] == 4 and f["epoch_pairs"] == 3 and f["deliveries"] == 4 * N


def test_identity_is_storage_order():
    f = of.figures([np.arange(N)] * 4, k=K, n=N)
    # mean in-chunk distance (K + 1) / 3 over (N + 1) / 3
    assert f["same_chunk_distance"] == pytest.approx((K + 1) / (N + 1), rel=1e-9)
    assert f["spearman_storage"] == pytest.approx(1.0)
    assert f["neighbour_fraction"] == 1.0
    assert f["epoch_position_correlation"] == pytest.approx(1.0)


def test_identical_epochs_correlate():
    e = perms(1)[0]
    f = of.figures([e, e], k=K, n=N)
    assert f["epoch_position_correlation"] == pytest.approx(1.0)
    assert abs(f["same_chunk_distance"] - 1) < 0.05


def test_reversed_storage_order():
    f = of.figures([np.arange(N)[::-1]], k=K, n=N)
    assert f["spearman_storage"] == pytest.approx(-1.0)
    assert f["neighbour_fraction"] == 1.0
    assert f["epoch_position_correlation"] is None  # one epoch: no pair


def test_pair_distance_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n, k = int(rng.integers(2, 60)), int(rng.integers(1, 9))
        e = rng.permutation(n)[: int(rng.integers(2, n + 1))]
        d, pairs = of._pair_distance(e, k, n)
        want = sum(abs(i - j) for i in range(len(e)) for j in range(i + 1, len(e))
                   if e[i] // k == e[j] // k)
        want_pairs = sum(1 for i in range(len(e)) for j in range(i + 1, len(e))
                         if e[i] // k == e[j] // k)
        assert d == want and pairs == want_pairs


def test_ids_round_trip(tmp_path):
    ep = perms(3, n=100) + [np.empty(0, dtype=np.int64)]
    p = tmp_path / "ids.txt"
    of.write_ids(p, ep)
    back = of.read_ids(p)
    assert len(back) == 4 and all((a == b).all() for a, b in zip(ep, back))


def test_recipe_order_is_once_per_epoch():
    import shard_recipe as sr
    rng = np.random.default_rng(5)
    sizes = rng.integers(50_000, 150_000, size=1500)
    order = sr.recipe_order(sizes, memory=int(sizes.sum() // 4), workers=2, batch=32,
                            seed=1, epochs=4)
    assert len(order) == 4
    for e in order:
        assert sorted(e) == list(range(len(sizes)))
    f = of.figures(order, k=K, n=len(sizes))
    # a buffer of 25 % mixes shards but keeps a shard's samples close in time
    assert 0.2 < f["same_chunk_distance"] < 0.9
    assert abs(f["epoch_position_correlation"]) < 0.2


def gen_tree(tmp_path, count, mean, classes, seed):
    """tmp_path/tree: loader_gen.py's folder of class folders (files/) and list."""
    tree = tmp_path / "tree"
    subprocess.run([sys.executable, os.path.join(HERE, "loader_gen.py"), "tree", str(tree),
                    "--count", str(count), "--mean", str(mean), "--classes", str(classes),
                    "--seed", str(seed)], check=True)
    return tree


def build_dir():
    return os.environ.get("HDMLP_BUILD", os.path.join(HERE, "..", "..", "build"))


def test_agrees_with_hdmlp_bench(tmp_path):
    bench = os.path.join(build_dir(), "loader", "hdmlp-bench")
    pack = os.path.join(build_dir(), "packer", "hdmlp-pack")
    if not (os.access(bench, os.X_OK) and os.access(pack, os.X_OK)):
        pytest.skip("no built hdmlp-bench / hdmlp-pack")
    tree = gen_tree(tmp_path, 400, 8000, 4, 2)
    ds = tmp_path / "ds"
    subprocess.run([pack, "--chunk-size", "16", "--seed", "7", "--compress", "none", "--quiet",
                    "--force", "-o", str(ds), str(tree / "files")], check=True)
    for extra in ([], ["--relaxed"]):
        ids = tmp_path / "ids.txt"
        out = subprocess.run([bench, str(ds), "--memory", "50%", "--batch", "4", "--epochs",
                              "4", "--seed", "3", "--json", "--quiet", "--ids", str(ids)]
                             + extra, check=True, capture_output=True, text=True).stdout
        want = json.loads(out.strip().splitlines()[-1])
        got = of.file_figures(str(ids), k=16, n=400)
        assert got["same_chunk_distance"] == pytest.approx(want["same_chunk_distance"],
                                                           rel=1e-8)
        assert got["epoch_position_correlation"] == pytest.approx(
            want["epoch_position_correlation"], rel=1e-7, abs=1e-9)


def test_recipe_read_delivers_the_generated_order(tmp_path):
    pytest.importorskip("torch")
    tree = gen_tree(tmp_path, 300, 6000, 5, 4)
    shards = tmp_path / "shards"
    script = os.path.join(HERE, "shard_recipe.py")
    subprocess.run([sys.executable, script, "write", str(tree / "files"), str(shards)],
                   check=True, capture_output=True)
    meta = json.load(open(shards / "recipe.json"))
    assert len(meta["shards"]) >= 8 and sorted(meta["source_index"]) == list(range(300))
    logs = {}
    for mode in ([], ["--order-only"]):
        log = tmp_path / f"log{len(mode)}"
        out = subprocess.run([sys.executable, script, "read", str(shards), "--memory", "25%",
                              "--epochs", "2", "--workers", "2", "--batch", "8",
                              "--impl", "tarfile", "--log", str(log)] + mode,
                             check=True, capture_output=True, text=True).stdout
        res = json.loads(out.strip().splitlines()[-1])
        assert res["samples"] == 600
        logs[len(mode)] = of.read_ids(log)
    for a, b in zip(logs[0], logs[1]):
        assert (a == b).all()
