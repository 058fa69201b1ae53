"""examples/train_fashion_mnist.py in a short form: one epoch on a subset, both pipelines
well above chance (0.1)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, tool

FMNIST = "/usr/share/datasets/fashion-mnist"


def test_train_fashion_mnist_short(tmp_root):
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    if not os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist not installed")
    cmd = [sys.executable, os.path.join(SOURCE_DIR, "examples", "train_fashion_mnist.py"),
           "--limit-train", "3000", "--limit-test", "1000", "--epochs", "1",
           "--batch-size", "32", "--memory", "1M", "--workers", "1", "--json",
           "--workdir", os.path.join(tmp_root, "fmnist"), "--hdmlp-pack", tool("hdmlp-pack")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)
    results = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(results) == {"hdmlp", "torchvision"}
    for name, r in results.items():
        assert r["accuracy"] > 0.5, f"{name}: accuracy {r['accuracy']}"
